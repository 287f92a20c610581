package telegram

import (
	"testing"

	"github.com/go-telegram/bot/models"
)

func TestParseCommand(t *testing.T) {
	ent := func(n int) []models.MessageEntity {
		return []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 0, Length: n}}
	}
	for _, tc := range []struct {
		text     string
		entities []models.MessageEntity
		cmd      string
		other    bool
	}{
		{"/start", ent(6), "start", false},
		{"/Help me", ent(5), "help", false},
		{"/reset@MyBot", ent(12), "reset", false},
		{"/reset@other_bot", ent(16), "", true},
		{"/start", nil, "", false},
		{"hi /start", []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 3, Length: 6}}, "", false},
		// Entities that do not fit the text mark nothing.
		{"/start", ent(-1), "", false},
		{"/start", ent(99), "", false},
		{"/start", []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 1 << 62, Length: 1 << 62}}, "", false},
	} {
		cmd, other := parseCommand(tc.text, tc.entities, "mybot")
		if cmd != tc.cmd || other != tc.other {
			t.Errorf("parseCommand(%q) = %q,%v; want %q,%v", tc.text, cmd, other, tc.cmd, tc.other)
		}
	}
}
