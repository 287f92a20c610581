package bot

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"brainbot/bot/conversation"
)

// One update the client library cannot decode must not stop a bot: it is
// logged once at warn, confirmed and skipped, a person who wrote it gets a
// short reply, and the next message is answered. The fixtures are shaped
// like Telegram's updates with union types newer than the library.
func TestUndecodableUpdatesAreSkipped(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  unreadable: Couldn't read that.\n")}, nil)
	cases := []struct {
		file string
		// replyTo is the chat told "couldn't read" (0: none, as for a
		// reaction, a boost or a service message nobody wrote to us).
		replyTo int64
	}{
		{"forward-origin.json", 7},
		{"paid-media.json", 7},
		{"reply-origin.json", -4001}, // a group message that mentions the bot
		{"wrong-type-text.json", 7},  // its text of another JSON type
		{"wrong-type-topic.json", -1004001},
		{"reaction.json", 0},
		{"background.json", 0},
		{"boost.json", 0},
		{"member-status.json", 0},
	}
	for i, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("telegram", "testdata", "undecodable", c.file))
			if err != nil {
				t.Fatal(err)
			}
			before := len(h.srv.Sent(tokenA))
			id := h.srv.SendUpdate(tokenA, raw)
			probe := fmt.Sprintf("probe %d", i)
			h.srv.SendText(tokenA, 7, 7, probe)
			var want []string
			if c.replyTo != 0 {
				want = append(want, fmt.Sprintf("%d:Couldn't read that.", c.replyTo))
			}
			want = append(want, "7:You said: "+probe)
			got := h.waitSent(tokenA, before+len(want))[before:]
			var sent []string
			for _, call := range got {
				sent = append(sent, fmt.Sprintf("%d:%s", call.ChatID(), call.Param("text")))
			}
			// The notice is not queued behind the conversation, so it may
			// come before or after the probe's answer.
			slices.Sort(sent)
			slices.Sort(want)
			if !slices.Equal(sent, want) {
				t.Fatalf("sent %q, want %q", sent, want)
			}
			var logged bool
			for _, e := range h.logs.FilterMessage("undecodable update skipped").All() {
				f := e.ContextMap()
				if f["update_id"] == id {
					logged = true
					if e.Level.String() != "warn" || f["bot"] != "alpha" || f["error"] == nil {
						t.Errorf("log line = %v %v", e.Level, f)
					}
					if strings.Contains(fmt.Sprint(f), "look at this") || strings.Contains(fmt.Sprint(f), "what about this") {
						t.Errorf("message text logged: %v", f)
					}
				}
			}
			if !logged {
				t.Errorf("no warn line for update %d", id)
			}
		})
	}
	if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
		t.Fatalf("updates left unconfirmed: %v", err)
	}
}

// A tap the library cannot decode is answered all the same, as a tap on
// a button that no longer works: the user's spinner stops, with a word.
func TestUndecodableTapIsAnswered(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	raw, err := os.ReadFile(filepath.Join("telegram", "testdata", "undecodable", "wrong-type-tap.json"))
	if err != nil {
		t.Fatal(err)
	}
	h.srv.SendUpdate(tokenA, raw)
	answer, err := h.srv.WaitAnswer(h.ctx(), tokenA, "3148915127338413297")
	if err != nil {
		t.Fatalf("the tap was not answered: %v", err)
	}
	if got := answer.Param("text"); got != conversation.NoticeGone {
		t.Errorf("the tap was answered %q, want %q", got, conversation.NoticeGone)
	}
}
