package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"brainbot/bot/telegramtest"
	"brainbot/cmd/internal/stack"
)

// A bot summoned as a guest in a group it is not in answers once through
// answerGuestQuery, with the real CLI; a voice brain answers in text.
func TestEndToEndGuestQuery(t *testing.T) { eachMode(t, testGuestQuery) }

func testGuestQuery(t *testing.T, env []string) {
	s := newStackWith(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for _, bot := range []string{"narrator", "speaker"} {
		token := stack.Token(bot)
		query := s.Telegram.SummonAsGuest(token, 971, -1009710, "what is a haiku?")
		if text := guestAnswer(ctx, t, s, bot, query); !strings.Contains(text, "what is a haiku?") {
			t.Errorf("%s: guest answer %q, want the model's answer", bot, text)
		}
		summary := waitLogFrom(t, s, 0, func(l stack.Line) bool {
			return l.Msg == "request" && l.Str("bot") == bot && l.Int("chat") == -1009710
		})
		if summary.Str("outcome") != "ok" || summary.Str("mode") != "text" || summary.Int("user") != 971 {
			t.Errorf("%s: request line %v, want an ok text answer for the caller", bot, summary.Fields)
		}
		for _, c := range s.Telegram.Sent(token) {
			if c.ChatID() == -1009710 {
				t.Errorf("%s sent %s into a chat it is not in", bot, c.Method)
			}
		}
	}
}

// A guest conversation is the caller's in the chat they summoned the bot
// to. Ann and Bo each summon it in their private chat with Cy, which the
// bot knows by one id (Cy's): Bo's answer starts afresh, and his model
// request holds neither Ann's words nor the private message she quoted,
// while Ann's next question goes on with hers. A guest summoned in a group
// does not read the group's earlier conversation with the bot.
func TestEndToEndGuestConversations(t *testing.T) { eachMode(t, testGuestConversations) }

func testGuestConversations(t *testing.T, env []string) {
	s := newStackWith(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	const ann, bo, cy = 981, 982, 983
	withCy := fmt.Sprintf(`{"id":%d,"type":"private","first_name":"Cy"}`, cy)
	pin := fmt.Sprintf(`{"message_id":40,"date":%d,"chat":%s,"from":{"id":%d,"is_bot":false,"first_name":"Cy"},"text":"my PIN is 4321"}`,
		time.Now().Unix()-60, withCy, cy)

	first := guestAnswer(ctx, t, s, "narrator", summonIn(s, "narrator", ann, withCy, "what does this mean?", pin))
	if !strings.Contains(first, "what does this mean? (message 1)") {
		t.Errorf("Ann's answer %q", first)
	}
	if seen := modelSawWith(s, "what does this mean?"); !strings.Contains(seen, "my PIN is 4321") {
		t.Fatalf("the quoted message never reached the model: %q", seen)
	}
	second := guestAnswer(ctx, t, s, "narrator", summonIn(s, "narrator", bo, withCy, "what did they ask you?", ""))
	if !strings.Contains(second, "what did they ask you? (message 1)") {
		t.Errorf("Bo's answer %q, want the first message of a conversation of his own", second)
	}
	if seen := modelSawWith(s, "what did they ask you?"); strings.Contains(seen, "4321") || strings.Contains(seen, "what does this mean?") {
		t.Errorf("Bo's model request held Ann's words: %q", seen)
	}
	again := guestAnswer(ctx, t, s, "narrator", summonIn(s, "narrator", ann, withCy, "and in short?", ""))
	if !strings.Contains(again, "and in short? (message 2)") {
		t.Errorf("Ann's second answer %q, want her conversation going on", again)
	}

	const group = -100984
	token := stack.Token("narrator")
	s.Telegram.SendMessage(token, groupMessage(601, group, "the launch code is 0000", "@"+telegramtest.Username(token)))
	waitChat(t, s, token, group, 1)
	guest := guestAnswer(ctx, t, s, "narrator", s.Telegram.SummonAsGuest(token, 985, group, "what was the code?"))
	if !strings.Contains(guest, "(message 1)") {
		t.Errorf("the guest's answer in the group %q, want a conversation of their own", guest)
	}
	if seen := modelSawWith(s, "what was the code?"); strings.Contains(seen, "launch code") {
		t.Errorf("the guest's model request held the group's conversation: %q", seen)
	}
}

// summonIn queues a guest_message as Telegram sends it when caller
// summons bot with text in chat (JSON; in a private chat, the other
// party), replying to replyTo (JSON; "" for none), and returns the guest
// query's id.
func summonIn(s *stack.Stack, bot string, caller int64, chat, text, replyTo string) string {
	query := fmt.Sprintf("gq-%d-%d", caller, time.Now().UnixNano())
	mention := "@" + telegramtest.Username(stack.Token(bot))
	user := fmt.Sprintf(`{"id":%d,"is_bot":false,"first_name":"User%d"}`, caller, caller)
	raw := fmt.Sprintf(`{"update_id":1,"guest_message":{"message_id":41,"date":%d,"chat":%s,"from":%s,"guest_bot_caller_user":%s,`+
		`"guest_query_id":%q,"text":%q,"entities":[{"type":"mention","offset":0,"length":%d}]`,
		time.Now().Unix(), chat, user, user, query, mention+" "+text, len(utf16.Encode([]rune(mention))))
	if replyTo != "" {
		raw += `,"reply_to_message":` + replyTo
	}
	s.Telegram.SendUpdate(stack.Token(bot), []byte(raw+"}}"))
	return query
}

// guestAnswer waits for bot's answer to guest query and returns its text.
func guestAnswer(ctx context.Context, t *testing.T, s *stack.Stack, bot, query string) string {
	t.Helper()
	got, err := s.Telegram.WaitCall(ctx, stack.Token(bot), func(c telegramtest.Call) bool {
		return c.Method == "answerGuestQuery" && c.Param("guest_query_id") == query
	})
	if err != nil {
		t.Fatalf("%s: no guest answer: %v", bot, err)
	}
	var result struct {
		Content struct {
			Text string `json:"message_text"`
		} `json:"input_message_content"`
	}
	if err := json.Unmarshal([]byte(got.Param("result")), &result); err != nil {
		t.Fatalf("%s: guest answer %q: %v", bot, got.Param("result"), err)
	}
	return result.Content.Text
}

// modelSawWith is every text the model was sent in the requests whose
// user messages hold words: their whole conversations, joined.
func modelSawWith(s *stack.Stack, words string) string {
	var seen []string
	for _, r := range s.Model.Requests() {
		var texts []string
		asked := false
		for _, m := range r.Messages {
			for _, b := range m.Content {
				texts = append(texts, b.Text)
				asked = asked || m.Role == "user" && strings.Contains(b.Text, words)
			}
		}
		if asked {
			seen = append(seen, texts...)
		}
	}
	return strings.Join(seen, "\n")
}
