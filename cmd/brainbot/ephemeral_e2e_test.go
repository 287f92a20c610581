package main

import (
	"strings"
	"testing"

	"brainbot/bot/telegramtest"
	"brainbot/cmd/internal/stack"
)

// In a group, a notice meant for one user (access denied) is shown to that
// user only, as Telegram's ephemeral message; the group's other members
// see nothing.
func TestEndToEndEphemeralNotice(t *testing.T) { eachMode(t, testEphemeralNotice) }

func testEphemeralNotice(t *testing.T, env []string) {
	s := newStackWith(t, env)
	token := stack.Token("private")
	const group, stranger = -1009810, 981
	s.Telegram.SendMessage(token, groupMessage(stranger, group, "let me in", "@"+telegramtest.Username(token)))
	waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("chat") == group && l.Str("outcome") == "denied"
	})
	var notices []telegramtest.Call
	for _, c := range s.Telegram.Sent(token) {
		if c.ChatID() == group {
			notices = append(notices, c)
		}
	}
	if len(notices) != 1 || notices[0].Param("text") != "Go away, stranger." ||
		!strings.Contains(notices[0].Param("ephemeral_message_parameters"), `"receiver_user_id":981`) {
		t.Fatalf("group got %d messages (%v), want the denial for the stranger only", len(notices), notices)
	}
}
