package bot

import (
	"strings"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
)

var fastStream = func(c *Config) { c.StreamEvery = 10 * time.Millisecond }

// noDrafts makes drafts fail as where Telegram does not offer them: the
// reply streams by edits.
var noDrafts = telegramtest.Rule{Method: "sendMessageDraft",
	Err: telegramtest.APIError{Code: 400, Description: "Bad Request: method is not available"}}

// In a private chat the reply shows as a draft while it is written; the
// final message is the formatted reply, as without streaming.
func TestStreamAsDraft(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, fastStream)
	h.waitStreamed(tokenA, nil)
	got := h.exchange(tokenA, 7, "tell **me** #stream")
	if got.Param("text") != "You said: tell <b>me</b> #stream" || got.Param("parse_mode") != "HTML" {
		t.Fatalf("final reply = %q", got.Param("text"))
	}
	drafts := h.srv.Sent(tokenA, "sendMessageDraft")
	if len(drafts) < 2 || drafts[0].Param("text") != "You" || drafts[0].Param("draft_id") == "" || drafts[0].Param("draft_id") == "0" {
		t.Fatalf("drafts %s, want the text growing from its first word", describeCalls(drafts))
	}
	if last := drafts[len(drafts)-1].Param("text"); !strings.HasPrefix("You said: tell **me** #stream", last) {
		t.Errorf("last draft %q is not a prefix of the reply", last)
	}
	if e := h.waitLog("request"); e.ContextMap()["first_text_ms"] == nil {
		t.Error("request line lacks first_text_ms")
	}
	// stream: false shows nothing before the reply.
	h.writeBrain("alpha", brainFile(tokenA, "stream: false\n"))
	waitFor(t, func() bool { return !h.m.brain("alpha").Stream })
	h.exchange(tokenA, 8, "quiet #stream")
	for _, d := range h.srv.Sent(tokenA, "sendMessageDraft") {
		if d.ChatID() == 8 {
			t.Fatal("a draft with stream: false")
		}
	}
}

// Where drafts fail, and in groups, the reply streams as a message that
// is edited, and the final reply is edited into it: one message.
func TestStreamByEdits(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, fastStream)
	h.waitStreamed(tokenA, nil)
	h.srv.Fail(tokenA, noDrafts)
	for _, text := range []string{"first **one** #stream", "second #stream"} {
		before := len(h.srv.Sent(tokenA))
		h.srv.SendText(tokenA, 7, 7, text)
		word, _, _ := strings.Cut(text, " ")
		waitFor(t, func() bool {
			edits := h.srv.Sent(tokenA, "editMessageText")
			return len(edits) > 0 && strings.Contains(edits[len(edits)-1].Param("text"), word+" ") && edits[len(edits)-1].Param("parse_mode") == "HTML"
		})
		if sent := h.srv.Sent(tokenA)[before:]; len(sent) != 1 || sent[0].Param("parse_mode") != "" {
			t.Fatalf("%q: messages %s, want one, streamed as plain text", text, describeCalls(sent))
		}
	}
	edits := h.srv.Sent(tokenA, "editMessageText")
	if final := edits[len(edits)-1]; final.Param("text") != "You said: second #stream" {
		t.Errorf("final edit = %q", final.Param("text"))
	}
	if n := len(h.srv.Calls(tokenA)); n == 0 {
		t.Fatal("no calls")
	}
	if drafts := callsOf(h, tokenA, "sendMessageDraft"); drafts != 1 {
		t.Errorf("%d draft attempts, want 1: the chat streams by edits after the first failure", drafts)
	}

	// A group always streams by edits, replying to the message.
	h.srv.SendMessage(tokenA, groupMessage(9, "in the group #stream", true))
	waitFor(t, func() bool {
		for _, c := range h.srv.Sent(tokenA, "editMessageText") {
			if c.ChatID() == groupChat && c.Param("parse_mode") == "HTML" {
				return true
			}
		}
		return false
	})
	var first telegramtest.Call
	for _, c := range h.srv.Sent(tokenA) {
		if c.ChatID() == groupChat {
			first = c
		}
	}
	if first.Param("reply_parameters") == "" {
		t.Error("the streamed group message does not reply to the mention")
	}
}

// A reply that ends while its first streamed text is still on its way to
// Telegram is edited into that message once Telegram confirms it: the user
// gets one message, not the streamed one and the reply besides.
func TestStreamEndsWhileItsFirstTextIsSent(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, fastStream)
	h.srv.Fail(tokenA, noDrafts)
	release := h.srv.Hold(tokenA, "sendMessage") // the streamed message
	h.waitStreamed(tokenA, func(text string) bool { return text == "You" })
	h.srv.SendText(tokenA, 7, 7, "quick #stream")
	h.claude.waitFinished(t, 1) // the reply is complete; its first text is not confirmed
	release()
	h.waitLog("request")
	if sent := h.srv.Sent(tokenA, "sendMessage"); len(sent) != 1 || sent[0].Param("text") != "You" {
		t.Fatalf("messages %s, want only the streamed one", describeCalls(sent))
	}
	edits := h.srv.Sent(tokenA, "editMessageText")
	if len(edits) == 0 || edits[len(edits)-1].Param("text") != "You said: quick #stream" || edits[len(edits)-1].Param("parse_mode") != "HTML" {
		t.Fatalf("edits %s, want the final reply edited into the streamed message", describeCalls(edits))
	}
}
