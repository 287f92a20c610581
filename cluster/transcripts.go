package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Transcripts copies the Claude CLI's session transcripts to the object
// store after each turn and back before a resume, so a conversation goes
// on with its history on whichever instance answers it next.
type Transcripts struct {
	c *Cluster
	// path is where the CLI keeps a bot's session on this machine.
	path func(bot, session string) string

	mu sync.Mutex
	// local is the digest of each session file as last synced here.
	local map[string]string
}

// Transcripts returns the transcript store; path locates a session's file
// on this machine (claude.Driver.SessionFile).
func (c *Cluster) Transcripts(path func(bot, session string) string) *Transcripts {
	return &Transcripts{c: c, path: path, local: map[string]string{}}
}

func objectName(bot, session string) string { return keyPart(bot) + "/" + session }

// Save puts the session's transcript into the object store.
func (t *Transcripts) Save(ctx context.Context, bot, session string) error {
	data, err := os.ReadFile(t.path(bot, session))
	if errors.Is(err, os.ErrNotExist) {
		return nil // nothing written (yet)
	}
	if err != nil {
		return fmt.Errorf("read transcript: %w", err)
	}
	info, err := t.c.objects.PutBytes(ctx, objectName(bot, session), data)
	if err != nil {
		return fmt.Errorf("store transcript: %w", err)
	}
	t.mu.Lock()
	t.local[objectName(bot, session)] = info.Digest
	t.mu.Unlock()
	return nil
}

// Restore writes the stored transcript to this machine unless the local
// copy is the stored one; changed says it wrote one (a CLI process still
// holding the session here has an old copy and must end).
func (t *Transcripts) Restore(ctx context.Context, bot, session string) (changed bool, err error) {
	name := objectName(bot, session)
	info, err := t.c.objects.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up transcript: %w", err)
	}
	t.mu.Lock()
	same := t.local[name] == info.Digest
	t.mu.Unlock()
	if same {
		return false, nil
	}
	data, err := t.c.objects.GetBytes(ctx, name)
	if err != nil {
		return false, fmt.Errorf("fetch transcript: %w", err)
	}
	path := t.path(bot, session)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	tmp := path + ".restore"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, err
	}
	t.mu.Lock()
	t.local[name] = info.Digest
	t.mu.Unlock()
	return true, nil
}
