package bot

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"brainbot/bot/store"
	"brainbot/bot/store/storetest"
)

// The journal entry of an answered message that cannot be cleared (an
// admin's sqlite3 shell holds the database locked past the busy timeout)
// is cleared in the background once the lock is gone; meanwhile a replay
// would not answer it again.
func TestJournalClearIsRetriedAfterALongLock(t *testing.T) {
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil, shortBusyTimeout)
	unlock := h.answerUnderLock("#wait one")
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
	if _, err := os.Stat(filepath.Join(h.data, store.FileName+"-answered")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the answered entries' file after the retry: %v, want none", err)
	}
}

// When the lock outlasts shutdown's grace, the retry stops with it and
// the next start clears the entry before it replays the journal: the
// message is answered once.
func TestJournalClearOutlastingShutdownLandsAtTheNextStart(t *testing.T) {
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")},
		func(c *Config) { c.Grace = 300 * time.Millisecond }, shortBusyTimeout)
	unlock := h.answerUnderLock("#wait one")
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
func shortBusyTimeout(h *harness) { h.reopenStore(store.BusyTimeout(50 * time.Millisecond)) }

// reopenStore closes the harness's store and opens its file again.
func (h *harness) reopenStore(opts ...store.Option) {
	h.t.Helper()
	h.store.Close()
	st, err := store.Open(context.Background(), filepath.Join(h.data, store.FileName), opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.store = st
	h.t.Cleanup(func() { st.Close() })
}

// answerUnderLock sends text (a #wait request) from user 7 and, once the
// model was asked, locks the database from another connection, then lets
// the answer go out. The lock holds until unlock.
func (h *harness) answerUnderLock(text string) (unlock func()) {
	h.t.Helper()
	h.srv.SendText(tokenA, 7, 7, text)
	waitFor(h.t.(*testing.T), func() bool { return len(h.claude.requests()) == 1 })
	unlock = storetest.LockWrites(h.t, filepath.Join(h.data, store.FileName))
	close(h.claude.release)
	if got := h.waitSent(tokenA, 1)[0]; got.Param("text") != "You said: "+text {
		h.t.Fatalf("answer = %q", got.Param("text"))
	}
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
