package main

import (
	"io"
	"testing"

	"brainbot/bot/brain"
	"brainbot/bot/intake"
	"brainbot/bot/terminal"
	"brainbot/message"
)

// In `chat -chat group`, a line is a group message: the brain's groups
// rule decides whether the bot answers it, as the intake does, and the
// bot's @mention (its brain id) is taken out of what the model reads.
func TestChatGroupLines(t *testing.T) {
	b := &brain.Brain{ID: "poet", Name: "Poet", Groups: brain.GroupsMention}
	c := &chatSession{screen: terminal.New(io.Discard, b.Name), brain: b, chatType: "group",
		key: message.Key{Bot: b.ID, Chat: chatGroupID}, user: 5, firstName: "Ada"}
	for _, tt := range []struct {
		line, text, command string
		wanted              bool
	}{
		{line: "hello all", text: "hello all"},
		{line: "@poet write me a verse", text: "write me a verse", wanted: true},
		{line: "a verse for me, @Poet", text: "a verse for me,", wanted: true},
		{line: "/help", text: "/help", command: "help", wanted: true},
		{line: "/help@poet", text: "/help@poet", command: "help", wanted: true},
		{line: "/help@otherbot", text: "/help@otherbot", command: "help"},
	} {
		u := c.written(tt.line)
		if u.Text != tt.text || u.Command != tt.command || intake.Wants(u, b.Groups) != tt.wanted || !u.InGroup() || u.Sender != 5 {
			t.Errorf("%q: text %q, command %q, answered %v; want %q, %q, %v", tt.line, u.Text, u.Command,
				intake.Wants(u, b.Groups), tt.text, tt.command, tt.wanted)
		}
	}
}
