package bot

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"brainbot/state/sqlite"
	"brainbot/state/sqlite/sqlitetest"
)

// The journal entry of an answered message that cannot be cleared (an
// admin's sqlite3 shell holds the database locked past the busy timeout)
// is cleared in the background once the lock is gone; meanwhile a replay
// would not answer it again.
func TestJournalClearIsRetriedAfterALongLock(t *testing.T) {
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil, shortBusyTimeout)
	unlock := h.answerUnderLock("one")
	e := h.waitLog("could not clear journal entry; retrying")
	if e.Level.String() != "warn" || e.ContextMap()["journal_id"] == nil {
		t.Errorf("log line = %v %v, want warn naming the entry", e.Level, e.ContextMap())
	}
	if p, err := pendingOf(context.Background(), h.store, "alpha"); err != nil || len(p) != 0 {
		t.Fatalf("pending while locked = %+v, %v; want the answered message left out", p, err)
	}
	unlock()
	h.waitLog("journal entry cleared after retrying")
	waitEmptyJournal(t, h.store)
	if _, err := os.Stat(filepath.Join(h.data, sqlite.FileName+"-answered")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the answered entries' file after the retry: %v, want none", err)
	}
}

// When the lock outlasts shutdown's grace, the retry stops with it and
// the next start clears the entry before it replays the journal: the
// message is answered once.
func TestJournalClearOutlastingShutdownLandsAtTheNextStart(t *testing.T) {
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")},
		func(c *Config) { c.Grace = 300 * time.Millisecond }, shortBusyTimeout)
	unlock := h.answerUnderLock("one")
	h.waitLog("could not clear journal entry; retrying")
	h.stop() // with the lock held
	e := h.waitLog("journal entries not cleared before shutdown")
	if e.Level.String() != "error" || e.ContextMap()["journal_ids"] == nil {
		t.Errorf("log line = %v %v, want error naming the entries", e.Level, e.ContextMap())
	}
	unlock()
	h.restartAnswersNothingTwice()
	if n := h.logs.FilterMessage("replaying journaled message").Len(); n != 0 {
		t.Errorf("%d messages replayed, want none", n)
	}
}

// shortBusyTimeout makes the harness's store give up on a lock after 50ms
// instead of 10s.
func shortBusyTimeout(h *harness) { h.reopenStore(sqlite.BusyTimeout(50 * time.Millisecond)) }

// reopenStore closes the harness's store and opens its file again, with
// opts from now on.
func (h *harness) reopenStore(opts ...sqlite.Option) {
	h.t.Helper()
	h.storeOpts = opts
	h.openStore(nil)
}

// answerUnderLock sends text from user 7 and, once its answer reached
// Telegram (its session saved), locks the database from another
// connection, then lets Telegram confirm the answer. The lock holds until
// unlock.
func (h *harness) answerUnderLock(text string) (unlock func()) {
	h.t.Helper()
	confirm := h.srv.Hold(tokenA, "sendMessage")
	h.srv.SendText(tokenA, 7, 7, text)
	if got := h.waitSent(tokenA, 1)[0]; got.Param("text") != "You said: "+text {
		h.t.Fatalf("answer = %q", got.Param("text"))
	}
	unlock = sqlitetest.LockWrites(h.t, filepath.Join(h.data, sqlite.FileName))
	confirm()
	return unlock
}

// restartAnswersNothingTwice starts brainbot again as a new process would
// (the store opened again; stopping first if it runs) and sends a probe
// from user 7. Its answer must be the only new one: nothing answered
// before comes again (a replay in chat 7 would come before the probe's).
func (h *harness) restartAnswersNothingTwice() {
	h.t.Helper()
	h.stop()
	before := len(h.srv.Sent(tokenA))
	h.reopenStore()
	h.start()
	if got := h.exchange(tokenA, 7, "probe after the restart"); got.Param("text") != "You said: probe after the restart" {
		h.t.Fatalf("after the restart the bot sent %q first, want the probe's answer", got.Param("text"))
	}
	if sent := h.srv.Sent(tokenA); len(sent) != before+1 {
		h.t.Fatalf("sent %s after the restart, want only the probe's answer", describeCalls(sent[before:]))
	}
}

// In embedded mode, a session the store cannot save (an admin's sqlite3
// shell holds the write lock past the busy timeout) holds the answer
// back, as a cluster does when NATS is away: the message is handed back
// unanswered, not worked on again while the lock holds, and once it is
// gone answered once, as a retry of the same turn (the driver cuts the
// first attempt's copy from the session), in the conversation's session;
// the next message goes on in it.
func TestUnsavedSessionHandsTheMessageBack(t *testing.T) {
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil, shortBusyTimeout)
	h.exchange(tokenA, 7, "remember the lighthouse")
	h.srv.SendText(tokenA, 7, 7, "#wait what did I say?")
	waitFor(t, func() bool { return len(h.claude.requests()) == 2 })
	session := h.claude.requests()[1].SessionID // the first message's, resumed
	if session == "" {
		t.Fatal("the second message does not resume the first's session")
	}
	unlock := sqlitetest.LockWrites(t, filepath.Join(h.data, sqlite.FileName))
	close(h.claude.release)
	// Handed back, and again while the lock holds (its attempt cannot be
	// journaled): nothing is sent, and the model is not asked again.
	waitFor(t, func() bool {
		return h.logs.FilterMessage("state unavailable for now; the message is handed back and answered once it is back").Len() >= 3
	})
	if sent := h.srv.Sent(tokenA); len(sent) != 1 {
		t.Fatalf("sent %s while the session could not be saved, want only the first answer", describeCalls(sent))
	}
	if n := len(h.claude.requests()); n != 2 {
		t.Fatalf("the model was asked %d times, want 2: no work while the attempt cannot be journaled", n)
	}
	unlock()
	if got := h.waitSent(tokenA, 2)[1]; got.Param("text") != "You said: #wait what did I say?" {
		t.Fatalf("answer after the lock = %q", got.Param("text"))
	}
	reqs := h.claude.requests()
	if len(reqs) != 3 {
		t.Fatalf("the model was asked %d times, want 3", len(reqs))
	}
	if retry := reqs[2]; !retry.Retry || !retry.Resume || retry.SessionID != session {
		t.Errorf("the retry: Retry %v, Resume %v, session %q; want a retry resuming %q", retry.Retry, retry.Resume, retry.SessionID, session)
	}
	h.exchange(tokenA, 7, "and now?")
	if next := h.claude.requests()[3]; !next.Resume || next.SessionID != session {
		t.Errorf("the next message: Resume %v, session %q; want %q resumed", next.Resume, next.SessionID, session)
	}
	if sent := h.srv.Sent(tokenA); len(sent) != 3 {
		t.Errorf("sent %s, want one answer per message", describeCalls(sent))
	}
}
