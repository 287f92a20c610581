package statetest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"brainbot/state"
)

// The CLI's transcripts, and the pruning. A backend may keep transcripts
// where the CLI writes them and do nothing (the embedded one), or store
// them and bring them back (a cluster's): either way the local file is
// what the CLI wrote last and a backend stored.

const transcript = `{"type":"user","message":{"role":"user","content":"hello"}}` + "\n"

// writeTranscript writes the session's local transcript, as the CLI does.
func writeTranscript(t *testing.T, s *subject, bot, session, text string) {
	t.Helper()
	path := s.sessionFile(bot, session)
	must(t, os.MkdirAll(filepath.Dir(path), 0o700))
	must(t, os.WriteFile(path, []byte(text), 0o600))
}

// wantTranscript checks the local transcript ("" for none).
func wantTranscript(t *testing.T, s *subject, bot, session, want string) {
	t.Helper()
	got, err := os.ReadFile(s.sessionFile(bot, session))
	if errors.Is(err, fs.ErrNotExist) && want == "" {
		return
	}
	must(t, err)
	if string(got) != want {
		t.Errorf("local transcript of %s = %q, want %q", session, got, want)
	}
}

// restore restores the session and reports whether release was called.
func restore(t *testing.T, s *subject, bot, session string) (released bool) {
	t.Helper()
	must(t, s.Restore(ctx(t), bot, session, func() { released = true }))
	return released
}

var transcriptTests = []behaviour{
	{"SaveThenRestoreLeavesTheLocalFile", func(t *testing.T, s *subject) {
		writeTranscript(t, s, "alice", "s1", transcript)
		must(t, s.Save(ctx(t), "alice", "s1"))
		if restore(t, s, "alice", "s1") {
			t.Error("Restore of the copy saved here released the CLI holding it")
		}
		wantTranscript(t, s, "alice", "s1", transcript)
		more := transcript + `{"type":"assistant"}` + "\n"
		writeTranscript(t, s, "alice", "s1", more)
		must(t, s.Save(ctx(t), "alice", "s1"))
		restore(t, s, "alice", "s1")
		wantTranscript(t, s, "alice", "s1", more)
	}},
	{"NeverSavedLeavesTheLocalFileAlone", func(t *testing.T, s *subject) {
		writeTranscript(t, s, "alice", "local", transcript)
		if restore(t, s, "alice", "local") {
			t.Error("Restore of a session never saved released the CLI")
		}
		wantTranscript(t, s, "alice", "local", transcript)
		restore(t, s, "alice", "nowhere")
		wantTranscript(t, s, "alice", "nowhere", "")
	}},
	{"SaveWithoutLocalFile", func(t *testing.T, s *subject) {
		must(t, s.Save(ctx(t), "alice", "unwritten"))
		restore(t, s, "alice", "unwritten")
		wantTranscript(t, s, "alice", "unwritten", "")
	}},
	{"AfterRestartTheLocalFileIsAsSaved", func(t *testing.T, s *subject) {
		writeTranscript(t, s, "alice", "s1", transcript)
		must(t, s.Save(ctx(t), "alice", "s1"))
		s.restarted()
		restore(t, s, "alice", "s1")
		wantTranscript(t, s, "alice", "s1", transcript)
	}},
	{"ConcurrentRestoresOfOneSession", func(t *testing.T, s *subject) {
		// A message's request and a prewarm may restore one session at
		// once: each succeeds, and the local file is never a part of it.
		long := strings.Repeat(transcript, 5000)
		writeTranscript(t, s, "alice", "s1", long)
		must(t, s.Save(ctx(t), "alice", "s1"))
		s.restarted() // no local copy known: each Restore writes it
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if err := s.Restore(ctx(t), "alice", "s1", func() {}); err != nil {
					t.Errorf("Restore = %v", err)
				}
				if got, err := os.ReadFile(s.sessionFile("alice", "s1")); err != nil || string(got) != long {
					t.Errorf("after a Restore the local transcript has %d bytes (%v), want %d", len(got), err, len(long))
				}
			})
		}
		wg.Wait()
	}},
	{"ForgetThenRestore", func(t *testing.T, s *subject) {
		writeTranscript(t, s, "alice", "s1", transcript)
		must(t, s.Save(ctx(t), "alice", "s1"))
		s.Forget("alice", "s1")
		restore(t, s, "alice", "s1")
		wantTranscript(t, s, "alice", "s1", transcript)
	}},
}

var maintenanceTests = []behaviour{
	{"PruneKeepsWhatIsCurrent", func(t *testing.T, s *subject) {
		now := base()
		must(t, s.UseSession(ctx(t), chat, "s1", now))
		must(t, s.SetVoice(ctx(t), "alice", 7, true))
		must1(t, s, "alice", 7, 0, now)
		record(t, s, state.Usage{At: now, Bot: "alice", User: 7, Mode: "text", ClaudeUSD: 0.5})
		q := question(7, "yes", "no")
		must(t, s.SaveButtons(ctx(t), q))
		appendAll(t, s, update(chat, 51))
		// What Prune counts is the backend's: an embedded one deletes
		// records, one whose records expire by themselves deletes none.
		if _, err := s.Prune(ctx(t), now, state.DefaultRetention); err != nil {
			t.Fatalf("Prune = %v", err)
		}
		wantSession(t, s, chat, state.Session{ID: "s1", Created: now, LastUsed: now})
		wantVoice(t, s, "alice", 7, true, true)
		wantCount(t, s, "alice", 7, now, 1)
		wantSpent(t, s, "alice", 7, now, 0.5)
		wantButtons(t, s, q)
		// Years later, a session still current and a choice made are
		// kept, and so is an update not answered.
		if _, err := s.Prune(ctx(t), now.Add(3*365*24*time.Hour), state.DefaultRetention); err != nil {
			t.Fatalf("Prune = %v", err)
		}
		wantSession(t, s, chat, state.Session{ID: "s1", Created: now, LastUsed: now})
		wantVoice(t, s, "alice", 7, true, true)
		c := startConsume(t, s)
		if d := c.next(t); d.Envelope().UpdateID != 51 {
			t.Errorf("after Prune, update %d was handed, want 51", d.Envelope().UpdateID)
		} else {
			d.Done(true)
		}
	}},
}
