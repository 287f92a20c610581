package telegram

import (
	"cmp"
	"strings"

	"github.com/go-telegram/bot/models"

	"brainbot/message"
)

// readReply reads what msg replies to: the part the user quoted (quote),
// else the replied-to message's text or caption; and whose words they
// were. A reply to a message of another chat or topic (external_reply)
// carries no text but a quote. nil when there is no text to tell of.
func readReply(msg *models.Message, me message.Identity) *message.Reply {
	var r message.Reply
	switch {
	case msg.ReplyToMessage != nil:
		to := msg.ReplyToMessage
		r.Text = cmp.Or(to.Text, to.Caption)
		r.Author = authorName(to)
		r.Mine = to.From != nil && to.From.ID == me.ID
	case msg.ExternalReply != nil:
		r.Author = originName(msg.ExternalReply.Origin)
	default:
		return nil
	}
	if msg.Quote != nil && strings.TrimSpace(msg.Quote.Text) != "" {
		r.Text, r.Quoted = msg.Quote.Text, true
	}
	if strings.TrimSpace(r.Text) == "" {
		return nil
	}
	return &r
}

// authorName is who wrote msg as a reader sees it ("" when Telegram does
// not say).
func authorName(msg *models.Message) string {
	if msg.From == nil && msg.SenderChat == nil {
		return ""
	}
	return senderName(msg)
}

// originName is who wrote a message of another chat, by its origin.
func originName(o models.MessageOrigin) string {
	switch {
	case o.MessageOriginUser != nil:
		u := o.MessageOriginUser.SenderUser
		return strings.TrimSpace(u.FirstName + " " + u.LastName)
	case o.MessageOriginHiddenUser != nil:
		return o.MessageOriginHiddenUser.SenderUserName
	case o.MessageOriginChat != nil:
		return o.MessageOriginChat.SenderChat.Title
	case o.MessageOriginChannel != nil:
		return o.MessageOriginChannel.Chat.Title
	}
	return ""
}
