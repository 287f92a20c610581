package bot

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/message"
)

// guestText is the text of a guest query's answer (an article's
// input_message_content).
func guestText(t *testing.T, c telegramtest.Call) string {
	t.Helper()
	var result struct {
		Type    string `json:"type"`
		Content struct {
			Text string `json:"message_text"`
		} `json:"input_message_content"`
	}
	if err := json.Unmarshal([]byte(c.Param("result")), &result); err != nil || result.Type != "article" {
		t.Fatalf("answerGuestQuery result %q: %v, want an article", c.Param("result"), err)
	}
	return result.Content.Text
}

// A bot summoned as a guest answers once through the query, in text, with
// the caller's access rules, in a conversation of the chat it was
// summoned to (never the caller's private one); a failure gets the
// brain's short error, not silence.
func TestGuestQueries(t *testing.T) {
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, "tts:\n  enabled: true\n"),
		"beta":  brainFile(tokenB, "access:\n  allowed_users: [1]\nmessages:\n  denied: Members only.\n"),
	}, nil)
	query := h.srv.SummonAsGuest(tokenA, 7, -100, "tell me something")
	got := h.waitSent(tokenA, 1, "answerGuestQuery")[0]
	if got.Param("guest_query_id") != query || guestText(t, got) != "You said: User7: tell me something" {
		t.Fatalf("guest answer %q to %q, want the model's text to %q", guestText(t, got), got.Param("guest_query_id"), query)
	}
	// In a private chat between others: its own conversation.
	h.srv.SummonAsGuest(tokenA, 7, 8, "and here?")
	h.waitSent(tokenA, 2, "answerGuestQuery")
	h.srv.SummonAsGuest(tokenA, 7, -100, "please #fail")
	if failed := h.waitSent(tokenA, 3, "answerGuestQuery")[2]; guestText(t, failed) != "Sorry, something went wrong. Please try again." {
		t.Errorf("a failed guest query answered %q, want the brain's error", guestText(t, failed))
	}
	if sent := h.srv.Sent(tokenA); len(sent) != 0 {
		t.Errorf("sent %s to chats, want only guest answers (text, though the brain speaks)", describeCalls(sent))
	}
	var conversations []string
	for _, r := range h.claude.requests() {
		conversations = append(conversations, r.Conversation)
	}
	inGroup, inPrivate := message.GuestKey("alpha", -100, 7).String(), message.GuestKey("alpha", 8, 7).String()
	if want := []string{inGroup, inPrivate, inGroup}; len(conversations) != 3 || conversations[0] != want[0] || conversations[1] != want[1] {
		t.Errorf("conversations %v, want %v", conversations, want)
	}

	h.srv.SummonAsGuest(tokenB, 7, -100, "hi")
	if denied := h.waitSent(tokenB, 1, "answerGuestQuery")[0]; guestText(t, denied) != "Members only." {
		t.Errorf("a caller not allowed got %q", guestText(t, denied))
	}
}

// A guest message for a bot whose guest mode is off (as getMe says) is
// not answered: a debug line, and it is confirmed.
func TestGuestMessageWithoutGuestMode(t *testing.T) {
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil, func(h *harness) { h.srv.NoGuestMode(tokenA) })
	h.srv.SummonAsGuest(tokenA, 7, -100, "hello?")
	h.waitLog("guest message for a bot without guest mode: skipped")
	if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
		t.Fatal(err)
	}
	if got := h.exchange(tokenA, 7, "probe"); got.Param("text") != "You said: probe" {
		t.Fatalf("after the guest message: %q", got.Param("text"))
	}
	if n := callsOf(h, tokenA, "answerGuestQuery"); n != 0 {
		t.Errorf("answered %d guest queries, want none", n)
	}
}

// Two callers who summon the bot in their private chats with the same
// person (one chat id to the bot) have a conversation each, and neither
// is the bot's own private chat with that person.
func TestGuestCallersInOnePrivateChat(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	h.srv.SummonAsGuest(tokenA, 7, 8, "my secret")
	h.waitSent(tokenA, 1, "answerGuestQuery")
	h.srv.SummonAsGuest(tokenA, 9, 8, "what did they say?")
	h.waitSent(tokenA, 2, "answerGuestQuery")
	reqs := h.claude.requests()
	if len(reqs) != 2 || reqs[0].Conversation == reqs[1].Conversation || reqs[1].Conversation == "alpha/8/0" {
		t.Fatalf("%d requests, want two in two conversations apart from the bot's chat with 8", len(reqs))
	}
	first, _, _ := h.store.Session(context.Background(), message.GuestKey("alpha", 8, 7))
	second, _, _ := h.store.Session(context.Background(), message.GuestKey("alpha", 8, 9))
	if first.ID == "" || first.ID == second.ID {
		t.Errorf("sessions %q and %q, want one for each caller", first.ID, second.ID)
	}
}

// While the bot's requests wait for a Claude slot, a caller has one guest
// request waiting, as a private chat has one message: summoned from
// another chat meanwhile, the bot answers that query busy, and the line
// stays open to everyone else.
func TestGuestCallerWaitsWithOneRequest(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  busy: Too busy.\n")},
		func(c *Config) { c.MaxClaude = 1; c.MaxWaitingPerBot = 5; c.MaxWait = time.Minute })
	h.srv.SendText(tokenA, 1, 1, "#wait running")
	h.claude.waitCalls(t, 1)
	first := h.srv.SummonAsGuest(tokenA, 7, -100, "first")
	waitFor(t, func() bool { return h.waitingForClaude() == 1 })
	second := h.srv.SummonAsGuest(tokenA, 7, 8, "second")
	if got := h.waitSent(tokenA, 1, "answerGuestQuery")[0]; got.Param("guest_query_id") != second || guestText(t, got) != "Too busy." {
		t.Fatalf("guest answer %q to %s, want the busy text to the second query", guestText(t, got), got.Param("guest_query_id"))
	}
	h.srv.SendText(tokenA, 2, 2, "waits its turn")
	waitFor(t, func() bool { return h.waitingForClaude() == 2 })
	close(h.claude.release)
	if got := h.waitSent(tokenA, 2, "answerGuestQuery")[1]; got.Param("guest_query_id") != first || guestText(t, got) != "You said: User7: first" {
		t.Errorf("guest answer %q to %s, want the model's to the first query", guestText(t, got), got.Param("guest_query_id"))
	}
	for _, c := range h.waitSent(tokenA, 2, "sendMessage") {
		if c.ChatID() == 2 && c.Param("text") != "You said: waits its turn" {
			t.Errorf("user 2 got %q", c.Param("text"))
		}
	}
}
