package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"brainbot/bot/telegramtest"
)

// A burst of 15 messages sent while the first is answered gets a handful
// of messages back: the answers to those that fit the queue (one answered,
// five waiting) and one notice for the rest, which are never replayed.
func TestBurstGetsAHandfulOfReplies(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  busy: Slow down.\n")}, nil)
	h.srv.SendText(tokenA, 7, 7, "#wait 0")
	h.claude.waitCalls(t, 1)
	for i := 1; i < 15; i++ {
		h.srv.SendText(tokenA, 7, 7, fmt.Sprintf("burst %d", i))
	}
	if got := h.waitSent(tokenA, 1)[0]; got.Param("text") != "Slow down." {
		t.Fatalf("first reply = %q, want the one busy notice", got.Param("text"))
	}
	if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
		t.Fatal(err)
	}
	close(h.claude.release)
	got := h.waitSent(tokenA, 7)
	var texts []string
	for _, c := range got {
		texts = append(texts, c.Param("text"))
	}
	want := []string{"Slow down.", "You said: #wait 0", "You said: burst 1", "You said: burst 2", "You said: burst 3", "You said: burst 4", "You said: burst 5"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("replies %q, want %q", texts, want)
	}
	waitSummaries(t, h.logs, 15)
	// Dropped messages were confirmed, not journaled: a restart answers
	// nothing more.
	waitEmptyJournal(t, h.store)
	h.stop()
	h.start()
	h.exchange(tokenA, 8, "after restart")
	if n := len(h.srv.Sent(tokenA)); n != 8 {
		t.Fatalf("%d messages sent after the restart, want 8: %s", n, describeCalls(h.srv.Sent(tokenA)))
	}
}

// Slots go to the bots in turn: a bot with one waiting request is served
// in the next round, after at most one request of a bot that has nine
// waiting.
func TestClaudeSlotsAreFairAcrossBots(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, ""), "beta": brainFile(tokenB, "")},
		func(c *Config) { c.MaxClaude = 1 })
	h.srv.SendText(tokenA, 1, 1, "#wait first")
	h.claude.waitCalls(t, 1)
	for u := int64(2); u <= 10; u++ {
		h.srv.SendText(tokenA, u, u, "alpha crowd")
	}
	waitFor(t, func() bool { return h.waitingForClaude() == 9 }) // alpha's
	h.srv.SendText(tokenB, 50, 50, "beta alone")
	waitFor(t, func() bool { return h.waitingForClaude() == 10 }) // and beta's
	close(h.claude.release)
	h.waitSent(tokenA, 10)
	h.waitSent(tokenB, 1)
	reqs := h.claude.requests()
	if reqs[1].BotID != "beta" && reqs[2].BotID != "beta" {
		var order []string
		for _, r := range reqs {
			order = append(order, r.BotID)
		}
		t.Fatalf("order of Claude requests %v: beta must be served in the first round after the running one", order)
	}
}

// Waiting for a slot is bounded per bot, in length and in time; beyond
// either the user gets the busy message, and waiting requests show no chat
// action.
func TestWaitingForClaudeIsBounded(t *testing.T) {
	brains := map[string]string{"alpha": brainFile(tokenA, "messages:\n  busy: Too busy.\n")}
	noActionsBut := func(h *harness, chat int64) {
		t.Helper()
		for _, c := range h.srv.Sent(tokenA, "sendChatAction") {
			if c.ChatID() != chat {
				t.Errorf("chat action sent to waiting chat %d", c.ChatID())
			}
		}
	}

	// In length: with one request waiting (for a minute at most), the next
	// is told at once.
	h := newHarness(t, brains, func(c *Config) { c.MaxClaude = 1; c.MaxWaitingPerBot = 1; c.MaxWait = time.Minute })
	h.srv.SendText(tokenA, 1, 1, "#wait running")
	h.claude.waitCalls(t, 1)
	h.srv.SendText(tokenA, 2, 2, "waits its turn")
	waitFor(t, func() bool { return h.waitingForClaude() == 1 })
	h.srv.SendText(tokenA, 3, 3, "line full")
	if got := h.waitSent(tokenA, 1, "sendMessage")[0]; got.ChatID() != 3 || got.Param("text") != "Too busy." {
		t.Fatalf("reply %s, want the busy text to user 3", describeCalls([]telegramtest.Call{got}))
	}
	noActionsBut(h, 1)
	close(h.claude.release)
	got := h.waitSent(tokenA, 3, "sendMessage")
	if !slices.ContainsFunc(got, func(c telegramtest.Call) bool {
		return c.ChatID() == 2 && c.Param("text") == "You said: waits its turn"
	}) {
		t.Errorf("replies %s, want user 2 answered once a slot was free", describeCalls(got))
	}

	// In time: a request waiting longer than MaxWait is told.
	h = newHarness(t, brains, func(c *Config) { c.MaxClaude = 1; c.MaxWait = 300 * time.Millisecond })
	h.srv.SendText(tokenA, 1, 1, "#wait running")
	h.claude.waitCalls(t, 1)
	h.srv.SendText(tokenA, 2, 2, "waits, then times out")
	if got := h.waitSent(tokenA, 1, "sendMessage")[0]; got.ChatID() != 2 || got.Param("text") != "Too busy." {
		t.Fatalf("reply %s, want the busy text to user 2", describeCalls([]telegramtest.Call{got}))
	}
	noActionsBut(h, 1)
	close(h.claude.release)
	h.waitSent(tokenA, 2, "sendMessage")
}

// A message still waiting for a Claude slot when brainbot stops has not
// started: its journal entry counts no attempt, so however often that
// happens it is answered as if new after a restart (never met with
// "please resend"), and counted against the daily limit once.
func TestWaitingMessageSurvivesRestarts(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")},
		func(c *Config) { c.MaxClaude = 1; c.Grace = 50 * time.Millisecond })
	h.srv.SendText(tokenA, 1, 1, "#wait blocker")
	h.claude.waitCalls(t, 1)
	h.srv.SendText(tokenA, 2, 2, "patient")
	waitFor(t, func() bool { return h.waitingForClaude() == 1 })
	h.stop()
	pending, _ := pendingOf(context.Background(), h.store, "alpha")
	if len(pending) != 2 || pending[1].Chat != 2 || pending[1].Attempts != 0 || pending[1].Mode != "text" {
		t.Fatalf("journal after stopping = %+v, want the waiting message charged with no attempt", pending)
	}
	close(h.claude.release)
	h.start()
	got := h.waitSent(tokenA, 2)
	for _, c := range got {
		if c.ChatID() == 2 && c.Param("text") != "You said: patient" {
			t.Fatalf("waiting message answered %q after the restart", c.Param("text"))
		}
	}
	if n, _ := h.store.DailyCount(context.Background(), "alpha", 2, time.Now()); n != 1 {
		t.Errorf("daily count %d, want 1", n)
	}
}

// A failing setMyCommands is retried in the background: it never holds up
// polling, so messages are answered meanwhile.
func TestCommandRegistrationNeverDelaysPolling(t *testing.T) {
	srvFail := func(h *harness) {
		h.srv.Fail(tokenA, telegramtest.Rule{Method: "setMyCommands", Err: telegramtest.APIError{Code: 502, Description: "Bad Gateway"}})
	}
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")},
		func(c *Config) { c.RetryMin = 10 * time.Second }, srvFail)
	if got := h.exchange(tokenA, 7, "hello"); got.Param("text") != "You said: hello" {
		t.Fatalf("reply while the command list fails = %q", got.Param("text"))
	}
}

// A changed token (one revoked and regenerated in @BotFather) loses no
// request: one running when the old token stops working is answered
// through the new one.
func TestTokenChangeLosesNoRequest(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")},
		func(c *Config) { c.RetryMin = 300 * time.Millisecond })
	h.srv.SendText(tokenA, 7, 7, "#wait long answer")
	h.claude.waitCalls(t, 1)
	h.srv.Unauthorize(tokenA)
	close(h.claude.release)
	h.writeBrain("alpha", brainFile(tokenB, ""))
	if got := h.waitSent(tokenB, 1)[0]; got.ChatID() != 7 || got.Param("text") != "You said: #wait long answer" {
		t.Fatalf("after the token change = %+v", got)
	}
}

// /stop is not queued behind the message it stops: the running turn is
// interrupted, the user told once, and the conversation goes on.
func TestStopInterruptsTheRunningAnswer(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	if got := h.exchange(tokenA, 7, "/stop"); got.Param("text") != "There is nothing to stop." {
		t.Fatalf("/stop with nothing running = %q", got.Param("text"))
	}
	h.srv.SendText(tokenA, 7, 7, "#wait a long answer")
	h.claude.waitCalls(t, 1)
	if got := h.exchange(tokenA, 7, "/stop"); got.Param("text") != "Stopped. What next?" {
		t.Fatalf("/stop = %q", got.Param("text"))
	}
	if got := h.exchange(tokenA, 7, "next"); got.Param("text") != "You said: next" {
		t.Fatalf("after /stop = %q", got.Param("text"))
	}
	var stopped bool
	for _, e := range waitSummaries(t, h.logs, 4) {
		stopped = stopped || e.ContextMap()["outcome"] == "stopped"
	}
	if !stopped {
		t.Error("no request line with outcome stopped")
	}
	if n := len(h.srv.Sent(tokenA)); n != 3 {
		t.Errorf("%d messages sent, want 3 (the stopped answer sends none): %s", n, describeCalls(h.srv.Sent(tokenA)))
	}
	h.exchange(tokenA, 7, "/reset")
	if h.claude.mu.Lock(); len(h.claude.ended) != 1 || h.claude.ended[0] != "alpha/7/0" {
		t.Errorf("/reset ended %v, want the conversation's warm process", h.claude.ended)
	}
	h.claude.mu.Unlock()
}

// waitingForClaude is how many requests wait for a Claude slot, as the
// metrics tell the admin.
func (h *harness) waitingForClaude() int {
	return int(testutil.ToFloat64(h.m.cfg.Metrics.ClaudeWaiting))
}
