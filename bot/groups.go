package bot

import (
	"strings"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"

	"brainbot/bot/brain"
)

// self is the bot as Telegram knows it (from getMe).
type self struct {
	id       int64
	username string
}

func isGroup(chat models.Chat) bool {
	return chat.Type == models.ChatTypeGroup || chat.Type == models.ChatTypeSupergroup
}

// addressed decides whether a group message is for this bot under the
// brain's groups setting and returns its text with the bot's own mentions
// removed. A message is for the bot when it is a command for it (/cmd or
// /cmd@bot), mentions it (@bot, or a text_mention of it) or replies to one
// of its messages; with groups: all, every message is.
func addressed(msg *models.Message, me self, setting string) (text string, ok bool) {
	text, entities := msg.Text, msg.Entities
	if text == "" {
		text, entities = msg.Caption, msg.CaptionEntities
	}
	units := utf16.Encode([]rune(text))
	var keep []uint16
	last := 0
	mentioned := false
	for _, e := range entities {
		start, end, ok := entitySpan(units, e)
		if !ok || start < last {
			continue
		}
		span := string(utf16.Decode(units[start:end]))
		isMe := e.Type == models.MessageEntityTypeMention && strings.EqualFold(span, "@"+me.username) ||
			e.Type == models.MessageEntityTypeTextMention && e.User != nil && e.User.ID == me.id
		if !isMe {
			continue
		}
		mentioned = true
		keep = append(keep, units[last:start]...)
		last = end
	}
	keep = append(keep, units[last:]...)
	cleaned := strings.Join(strings.Fields(string(utf16.Decode(keep))), " ")

	switch setting {
	case brain.GroupsOff:
		return "", false
	case brain.GroupsAll:
		return cleaned, true
	}
	cmd, forOther := parseCommand(msg.Text, msg.Entities, me.username)
	repliesToMe := msg.ReplyToMessage != nil && msg.ReplyToMessage.From != nil && msg.ReplyToMessage.From.ID == me.id
	return cleaned, mentioned || repliesToMe || cmd != "" && !forOther
}

// senderID is who wrote msg, for everything kept per sender: access,
// daily limits, spending caps, /voice, the files made for them. A message
// sent on behalf of a chat (sender_chat: a group's anonymous admins, a
// channel posting in a group) is that chat's, whose id is negative:
// Telegram sends all of those from one shared user (GroupAnonymousBot, or
// its service account), which would make the admins of every group one
// person.
func senderID(msg *models.Message) int64 {
	if msg.SenderChat != nil {
		return msg.SenderChat.ID
	}
	return msg.From.ID
}

// senderName is how a group message's author is shown to the model:
// their name, an anonymous admin's title or the chat they post as.
func senderName(msg *models.Message) string {
	if msg.SenderChat != nil {
		if msg.AuthorSignature != "" {
			return msg.AuthorSignature
		}
		return msg.SenderChat.Title
	}
	if msg.From == nil {
		return ""
	}
	return strings.TrimSpace(msg.From.FirstName + " " + msg.From.LastName)
}
