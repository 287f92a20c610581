package main

import (
	"strings"
	"testing"
	"time"

	"brainbot/cmd/internal/stack"
)

// A message edited while the real CLI answers it: the old version's turn
// is stopped and nothing of it is sent (its draft goes), the edited
// version is answered once, in the same session; an edit after that
// answer is not answered again.
func TestEndToEndEditWhileAnswered(t *testing.T) { eachMode(t, testEditWhileAnswered) }

func testEditWhileAnswered(t *testing.T, env []string) {
	s, ctx := pacedStack(t, env)
	token := stack.Token("narrator")
	const user = 951
	edit := func(text string) {
		s.Telegram.SendEdit(token, map[string]any{"message_id": 5001, "date": time.Now().Unix() - 1,
			"chat": map[string]any{"id": user, "type": "private", "first_name": "Ann"},
			"from": map[string]any{"id": user, "is_bot": false, "first_name": "Ann"}, "text": text})
	}

	s.SendMessage("narrator", user, map[string]any{"message_id": 5001, "text": "tell me a stroy #long"})
	waitDraft(ctx, t, s, token, user, 0)
	s.Model.SetPace(0)
	edit("tell me a story, short")
	answered := waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("user") == user && l.Str("outcome") == "ok"
	})
	old := waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("user") == user && l.Str("outcome") == "edited"
	})
	calls := s.ChatCalls("narrator", user)
	if len(calls) != 1 || !strings.HasPrefix(stack.Rendered(calls[0]), "You said: tell me a story, short") {
		var texts []string
		for _, c := range calls {
			texts = append(texts, stack.Rendered(c)[:min(60, len(stack.Rendered(c)))])
		}
		t.Fatalf("sent %q, want only the edited message's answer", texts)
	}
	if old.Float("cost_usd") <= 0 {
		t.Errorf("the stopped old version's line has no cost: %v", old.Fields)
	}
	if warm, _ := answered.Fields["warm"].(bool); !warm {
		t.Error("the edited version did not run in the conversation's CLI")
	}

	edit("tell me a story, shorter")
	waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "edited message not answered again: answered already, or never seen"
	})
	if n := len(s.ChatCalls("narrator", user)); n != 1 {
		t.Errorf("%d messages after the late edit, want still 1", n)
	}
	var asked []string
	for _, r := range s.Model.Requests() {
		for _, m := range r.Messages {
			for _, b := range m.Content {
				if m.Role == "user" && strings.HasPrefix(b.Text, "tell me a") {
					asked = append(asked, b.Text)
				}
			}
		}
	}
	if strings.Contains(strings.Join(asked, "|"), "shorter") {
		t.Errorf("the late edit reached the model: %q", asked)
	}
}

// In a group the answer streams as a message of the bot's: when the
// question is edited while the real CLI writes it, that message is
// deleted and the edited version answered, so the group reads one answer.
func TestEndToEndGroupEditWhileAnswered(t *testing.T) { eachMode(t, testGroupEditWhileAnswered) }

func testGroupEditWhileAnswered(t *testing.T, env []string) {
	s := askerStack(t, env)
	s.Model.SetPace(100 * time.Millisecond) // about 10 s for #long
	const group, user = -100779, 601
	token := stack.Token("asker")
	asked := groupMessage(user, group, "tell me a stroy #long", "")
	asked["message_id"] = 5101
	s.Telegram.SendMessage(token, asked)
	streamed := waitChat(t, s, token, group, 1)[0]
	s.Model.SetPace(0)
	edited := groupMessage(user, group, "tell me a story, short", "")
	edited["message_id"] = 5101
	s.Telegram.SendEdit(token, edited)
	waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("chat") == group && l.Str("outcome") == "ok"
	})
	if m, shown := s.Telegram.Message(token, group, streamed.MessageID); shown {
		t.Errorf("the old version's streamed answer is still in the group: %.60q", m.Text)
	}
	var shown []string
	for _, c := range waitChat(t, s, token, group, 2) {
		if m, ok := s.Telegram.Message(token, group, c.MessageID); ok {
			shown = append(shown, m.Text)
		}
	}
	if len(shown) != 1 || !strings.Contains(shown[0], "tell me a story, short") {
		t.Errorf("the group shows %.80q, want only the edited version's answer", shown)
	}
}
