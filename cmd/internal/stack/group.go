package stack

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"brainbot/bot/telegramtest"
)

// GroupUser is the user who writes in the groups of SendGroupCommand.
const GroupUser = 601

// SendGroupCommand posts text, a bot command ("/panel ..."), from
// GroupUser in the supergroup group, as one message with messageID that
// every bot named receives: privacy mode lets a plain command reach each
// bot of a group.
func (s *Stack) SendGroupCommand(group int64, messageID int, text string, bots ...string) {
	cmd, _, _ := strings.Cut(text, " ")
	for _, bot := range bots {
		s.Telegram.SendMessage(Token(bot), map[string]any{
			"message_id": messageID,
			"date":       time.Now().Unix(),
			"chat":       map[string]any{"id": group, "type": "supergroup", "title": "City"},
			"from":       map[string]any{"id": GroupUser, "is_bot": false, "first_name": "Ann"},
			"text":       text,
			"entities":   []map[string]any{{"type": "bot_command", "offset": 0, "length": len(cmd)}},
		})
	}
}

// Post is one message a bot posted in a group.
type Post struct {
	Bot, Method string
	// ID is the message's id in the group, ReplyTo the message it
	// replies to (0: none).
	ID, ReplyTo int
	Text        string
	Call        telegramtest.Call
}

// GroupPosts are the text and voice messages the bots posted in group, in
// chat order.
func (s *Stack) GroupPosts(group int64, bots ...string) []Post {
	var out []Post
	for _, bot := range bots {
		for _, c := range s.Telegram.Sent(Token(bot), "sendMessage", "sendVoice") {
			if c.ChatID() != group || c.Code != 200 {
				continue
			}
			var rp struct {
				MessageID int `json:"message_id"`
			}
			_ = json.Unmarshal([]byte(c.Param("reply_parameters")), &rp)
			out = append(out, Post{Bot: bot, Method: c.Method, ID: c.MessageID, ReplyTo: rp.MessageID, Text: Rendered(c), Call: c})
		}
	}
	slices.SortFunc(out, func(a, b Post) int { return a.ID - b.ID })
	return out
}
