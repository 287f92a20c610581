package bot

import (
	"slices"
	"strings"
	"testing"
)

// An admin's forget drops the messages the user sent that wait behind
// the one being answered: /forget promises that messages not answered
// yet go, and they must never reach the model (they were answered after
// the forget, in a new conversation). The admin learns how many went.
func TestForgetDropsTheMessagesWaiting(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	h.srv.SendText(tokenA, 7, 7, "#wait first")
	h.claude.waitCalls(t, 1)
	h.srv.SendText(tokenA, 7, 7, "my secret")
	h.srv.SendText(tokenA, 7, 7, "another secret")
	h.srv.SendText(tokenA, 8, 8, "#wait someone else")
	waitFor(t, func() bool { return h.m.intake.Backlog("alpha").Waiting == 2 && len(h.claude.requests()) == 2 })
	h.srv.SendText(tokenA, 8, 8, "their next")
	waitFor(t, func() bool { return h.m.intake.Backlog("alpha").Waiting == 3 })

	if _, err := h.m.Forget(h.ctx(), "alpha", 7); err != nil {
		t.Fatal(err)
	}
	if got := h.waitLog("user forgotten").ContextMap()["unanswered"]; got != int64(2) {
		t.Errorf("the forget logged %v messages dropped unanswered, want 2", got)
	}
	close(h.claude.release)
	waitSummaries(t, h.logs, 3)
	var prompts []string
	for _, r := range h.claude.requests() {
		prompts = append(prompts, r.Prompt)
	}
	if slices.ContainsFunc(prompts, func(p string) bool { return strings.Contains(p, "secret") }) {
		t.Errorf("the model got a forgotten user's waiting messages: %q", prompts)
	}
	if !slices.ContainsFunc(prompts, func(p string) bool { return strings.Contains(p, "their next") }) {
		t.Errorf("another user's waiting message was not answered: %q", prompts)
	}
	// Done with, not handed back: a restart answers none of them.
	waitEmptyJournal(t, h.store)
}
