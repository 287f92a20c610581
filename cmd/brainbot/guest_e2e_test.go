package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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
		got, err := s.Telegram.WaitCall(ctx, token, func(c telegramtest.Call) bool {
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
		if err := json.Unmarshal([]byte(got.Param("result")), &result); err != nil || !strings.Contains(result.Content.Text, "what is a haiku?") {
			t.Errorf("%s: guest answer %q (%v), want the model's answer", bot, got.Param("result"), err)
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
