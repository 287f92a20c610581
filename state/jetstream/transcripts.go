package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	jsapi "github.com/nats-io/nats.go/jetstream"

	"brainbot/state"
)

// ErrStaleTranscript: the transcript this instance holds is not the
// latest stored one (another instance answered the conversation since it
// was restored here); it is not stored over the newer one.
var ErrStaleTranscript = errors.New("cluster: a newer transcript of the session is stored")

// Transcripts copies the Claude CLI's session transcripts to the object
// store after each turn and back before a resume, so a conversation goes
// on with its history on whichever instance answers it next.
//
// Each copy is versioned and never overwritten: Save puts a new object
// (the version and the instance in its name) and only then moves the
// session's record in brainbot_state (transcript.<bot>.<session>) from
// the version it was restored from to the next, by revision. Restore
// fetches exactly the version the record names. So an older copy never
// replaces a newer one (a late Save of an instance the conversation has
// left fails its revision check), and a restore does not depend on which
// write reached the servers first.
type Transcripts struct {
	conn    *conn
	records jsapi.KeyValue // brainbot_state
	objects jsapi.ObjectStore
	// path is where the CLI keeps a bot's session on this machine.
	path func(bot, session string) string

	mu sync.Mutex
	// local is the version of each session's local file, as last
	// restored or saved here (absent: none, or unknown).
	local map[string]uint64
	// restoring holds a lock per session being restored: a message's
	// request and a prewarm may restore one at once, and each must find
	// the file whole when it returns. A lock goes with its last user.
	restoring map[string]*restoreLock
}

// restoreLock is a session's lock in Transcripts.restoring, and how many
// restores hold it or wait for it.
type restoreLock struct {
	sync.Mutex
	users int
}

// Transcripts returns the transcript store; path locates a session's file
// on this machine (claude.Driver.SessionFile).
func (c *Cluster) Transcripts(path func(bot, session string) string) *Transcripts {
	return &Transcripts{conn: c.conn, records: c.stateKV, objects: c.objects, path: path, local: map[string]uint64{},
		restoring: map[string]*restoreLock{}}
}

// transcriptRecord is the session's latest stored transcript.
type transcriptRecord struct {
	Version uint64 `json:"version"`
	Object  string `json:"object"`
}

func transcriptKey(bot, session string) string {
	return "transcript." + keyPart(bot) + "." + keyPart(session)
}

func (t *Transcripts) record(ctx context.Context, bot, session string) (transcriptRecord, error) {
	var rec transcriptRecord
	e, err := t.records.Get(ctx, transcriptKey(bot, session))
	if errors.Is(err, jsapi.ErrKeyNotFound) {
		return rec, nil
	}
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(e.Value(), &rec)
}

func (t *Transcripts) localVersion(bot, session string) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.local[transcriptKey(bot, session)]
	return v, ok
}

func (t *Transcripts) setLocal(bot, session string, v uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.local[transcriptKey(bot, session)] = v
}

// lockRestore takes the lock a Restore of the session holds, and returns
// its release.
func (t *Transcripts) lockRestore(bot, session string) (unlock func()) {
	key := transcriptKey(bot, session)
	t.mu.Lock()
	l := t.restoring[key]
	if l == nil {
		l = &restoreLock{}
		t.restoring[key] = l
	}
	l.users++
	t.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		t.mu.Lock()
		defer t.mu.Unlock()
		if l.users--; l.users == 0 {
			delete(t.restoring, key)
		}
	}
}

// Forget marks the local copy as unknown: the next Restore writes the
// stored one over it (a turn whose transcript could not be stored was
// handed back, and must not stay in the local history).
func (t *Transcripts) Forget(bot, session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.local, transcriptKey(bot, session))
}

// Save stores the session's local transcript as the version after the
// one it was restored or saved as here. ErrStaleTranscript: another
// instance stored a newer one meanwhile. An error wrapping
// state.ErrUnavailable: NATS did not answer within Config.Patience.
func (t *Transcripts) Save(ctx context.Context, bot, session string) error {
	data, err := os.ReadFile(t.path(bot, session))
	if errors.Is(err, os.ErrNotExist) {
		return nil // nothing written (yet)
	}
	if err != nil {
		return fmt.Errorf("read transcript: %w", err)
	}
	base, _ := t.localVersion(bot, session)
	next := transcriptRecord{Version: base + 1,
		Object: keyPart(bot) + "/" + session + "/" + strconv.FormatUint(base+1, 10) + "-" + keyPart(t.conn.cfg.Instance)}
	err = t.conn.patiently(ctx, "store transcript", func(ctx context.Context) error {
		_, err := t.objects.PutBytes(ctx, next.Object, data)
		return err
	})
	if err != nil {
		return err
	}
	stale, prev := false, ""
	err = t.conn.patiently(ctx, "store transcript version", func(ctx context.Context) error {
		return t.conn.change(ctx, t.records, transcriptKey(bot, session), func(old []byte, found bool) ([]byte, bool) {
			var cur transcriptRecord
			if found {
				_ = json.Unmarshal(old, &cur)
			}
			if cur.Object == next.Object {
				// Our own write, answered too late the first time.
				stale = false
				return nil, false
			}
			if stale = cur.Version != base; stale {
				return nil, false
			}
			prev = cur.Object
			b, _ := json.Marshal(next)
			return b, true
		})
	})
	if err == nil && stale {
		err = ErrStaleTranscript
	}
	if err != nil {
		t.dropObject(next.Object)
		return err
	}
	t.setLocal(bot, session, next.Version)
	// The copy it replaces: a restore still reading it has it whole, or
	// finds it gone and reads the record again.
	t.dropObject(prev)
	return nil
}

func (t *Transcripts) dropObject(name string) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	_ = t.objects.Delete(ctx, name) // an orphan costs space, not history
}

// legacy is the copy an earlier release stored under the session's name
// alone (no version), if there is no local one: nil when there is none
// or the local copy is there (it is then the newest).
func (t *Transcripts) legacy(ctx context.Context, bot, session string) ([]byte, error) {
	if _, err := os.Stat(t.path(bot, session)); err == nil {
		return nil, nil
	}
	data, err := t.objects.GetBytes(ctx, keyPart(bot)+"/"+session)
	if errors.Is(err, jsapi.ErrObjectNotFound) {
		return nil, nil
	}
	return data, err
}

// Restore writes the stored transcript the session's record names to this
// machine, unless the local copy is that version already. release is
// called first when it writes: whatever holds the old local copy (a warm
// CLI) must be gone, as a CLI that ends appends its own ending to the
// file. An error (wrapping state.ErrUnavailable when NATS did not
// answer, or the named copy cannot be had yet) means the message must
// wait: resuming without it would lose turns.
func (t *Transcripts) Restore(ctx context.Context, bot, session string, release func()) error {
	defer t.lockRestore(bot, session)()
	var rec transcriptRecord
	var data []byte
	err := t.conn.patiently(ctx, "fetch transcript", func(ctx context.Context) error {
		var err error
		if rec, err = t.record(ctx, bot, session); err != nil {
			return err
		}
		if rec.Version == 0 {
			data, err = t.legacy(ctx, bot, session)
			return err
		}
		if v, ok := t.localVersion(bot, session); ok && v == rec.Version {
			return nil
		}
		data, err = t.objects.GetBytes(ctx, rec.Object)
		if errors.Is(err, jsapi.ErrObjectNotFound) {
			// Replaced by a newer version since the record was read.
			return fmt.Errorf("transcript version %d (%s) not found: %w", rec.Version, rec.Object, state.ErrUnavailable)
		}
		return err
	})
	if err != nil || data == nil {
		return err
	}
	release()
	path := t.path(bot, session)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".restore"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	t.setLocal(bot, session, rec.Version)
	return nil
}
