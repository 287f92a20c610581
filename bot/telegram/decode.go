package telegram

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"

	"brainbot/message"
)

// KeyOf reads the update id of a raw update and the conversation it
// belongs to: its chat (and forum topic) for every kind of update that
// has one, a zero Chat for the rest. It reads no more than it needs, so
// an update whose other fields the library cannot decode has a key too.
// It is the one place a conversation key is made from an update.
func KeyOf(bot string, raw []byte) (updateID int64, key message.Key, ok bool) {
	var head updateHead
	if decodeLoosely(raw, &head) != nil || head.ID == 0 {
		return 0, message.Key{}, false
	}
	return head.ID, head.key(bot), true
}

// decodeLoosely decodes data into v as far as its types allow: a field
// whose JSON type is not v's (a string where a number belongs) is left
// zero and the others are read, as encoding/json does before it reports
// the first such field. Only data that is not JSON at all is an error.
// The few fields brainbot must always read of an update (its id, chat,
// sender) are read so, so that one odd field elsewhere hides none of them.
func decodeLoosely(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if _, wrongType := errors.AsType[*json.UnmarshalTypeError](err); wrongType {
		return nil
	}
	return err
}

// key is the conversation of the update the head was read from; a guest
// message's is its caller's in its chat (message.GuestKey).
func (h *updateHead) key(bot string) message.Key {
	if g := h.GuestMessage; g != nil {
		return message.GuestKey(bot, g.Chat.ID, g.caller())
	}
	key := message.Key{Bot: bot}
	if c := h.chat(); c != nil {
		key.Chat = c.Chat.ID
		if (c.Chat.Type == "group" || c.Chat.Type == "supergroup") && c.Topic {
			key.Thread = c.Thread
		}
	}
	return key
}

// updateHead is what KeyOf reads of an update.
type updateHead struct {
	ID                    int64     `json:"update_id"`
	Message               *chatHead `json:"message"`
	EditedMessage         *chatHead `json:"edited_message"`
	ChannelPost           *chatHead `json:"channel_post"`
	EditedChannelPost     *chatHead `json:"edited_channel_post"`
	BusinessMessage       *chatHead `json:"business_message"`
	EditedBusinessMessage *chatHead `json:"edited_business_message"`
	StoppedGeneration     *chatHead `json:"stopped_message_generation"`
	CallbackQuery         *struct {
		Message *chatHead `json:"message"`
	} `json:"callback_query"`
	MyChatMember         *chatHead `json:"my_chat_member"`
	ChatMember           *chatHead `json:"chat_member"`
	ChatJoinRequest      *chatHead `json:"chat_join_request"`
	MessageReaction      *chatHead `json:"message_reaction"`
	MessageReactionCount *chatHead `json:"message_reaction_count"`
	ChatBoost            *chatHead `json:"chat_boost"`
	RemovedChatBoost     *chatHead `json:"removed_chat_boost"`

	// GuestMessage is read with its caller.
	GuestMessage *guestHead `json:"guest_message"`
}

type chatHead struct {
	Chat struct {
		ID   int64  `json:"id"`
		Type string `json:"type"`
	} `json:"chat"`
	Thread int  `json:"message_thread_id"`
	Topic  bool `json:"is_topic_message"`
}

// guestHead is what KeyOf reads of a guest message: its chat and who
// summoned the bot there.
type guestHead struct {
	chatHead
	CallerUser *idHead `json:"guest_bot_caller_user"`
	CallerChat *idHead `json:"guest_bot_caller_chat"`
	SenderChat *idHead `json:"sender_chat"`
	From       *idHead `json:"from"`
}

type idHead struct {
	ID int64 `json:"id"`
}

// caller is who summoned the bot, as readGuest names its sender: the
// caller Telegram names, else the message's sender (senderID); 0 for
// none.
func (g *guestHead) caller() int64 {
	for _, id := range []*idHead{g.CallerUser, g.CallerChat, g.SenderChat, g.From} {
		if id != nil {
			return id.ID
		}
	}
	return 0
}

func (h *updateHead) chat() *chatHead {
	var query *chatHead
	if h.CallbackQuery != nil {
		query = h.CallbackQuery.Message
	}
	for _, c := range []*chatHead{h.Message, h.EditedMessage, h.ChannelPost, h.EditedChannelPost, h.BusinessMessage,
		h.EditedBusinessMessage, h.StoppedGeneration, query, h.MyChatMember, h.ChatMember, h.ChatJoinRequest,
		h.MessageReaction, h.MessageReactionCount, h.ChatBoost, h.RemovedChatBoost} {
		if c != nil {
			return c
		}
	}
	return nil
}

// Decode reads an envelope's update as brainbot does. An update the
// library cannot decode is message.Unreadable, with what could be read of
// who wrote it; a message someone sent is message.Written; a tap on one of
// the bot's buttons is message.Tapped; the bot's own membership changing
// is message.Membership; everything else is message.Unhandled.
func Decode(env message.Envelope) message.Update {
	var head updateHead
	_ = decodeLoosely(env.Raw, &head) // what could not be read is zero
	u := message.Update{ID: cmp.Or(head.ID, env.UpdateID), Key: head.key(env.Bot)}
	var up models.Update
	if err := json.Unmarshal(env.Raw, &up); err != nil {
		readUnreadable(&u, env.Raw, env.Me, err)
		return u
	}
	switch {
	case up.Message != nil:
		u.What = "message"
		readMessage(&u, up.Message, env.Me)
	case up.CallbackQuery != nil:
		readTap(&u, up.CallbackQuery)
	case up.MyChatMember != nil:
		u.What, u.Kind = "my_chat_member", message.Membership
		c := up.MyChatMember
		u.ChatType = string(c.Chat.Type)
		status := c.NewChatMember.Type
		u.Member = message.MemberChange{Status: string(status), By: c.From.ID,
			Left: status == models.ChatMemberTypeLeft || status == models.ChatMemberTypeBanned}
	case up.EditedMessage != nil:
		u.What = "edited_message"
		readMessage(&u, up.EditedMessage, env.Me)
		if u.Kind == message.Written {
			u.Kind = message.Edited
		}
	case up.GuestMessage != nil:
		u.What = "guest_message"
		readGuest(&u, up.GuestMessage, env.Me)
	case up.StoppedMessageGeneration != nil:
		u.What = "stopped_message_generation"
		readStop(&u, up.StoppedMessageGeneration)
	default:
		u.What = kindName(env.Raw)
	}
	return u
}

// readStop reads a draft's stop button pressed. Drafts are shown in
// private chats only, where the chat is the user who pressed it; a stop
// from anywhere else, or without a draft, is not one.
func readStop(u *message.Update, s *models.MessageGenerationStopped) {
	u.ChatType = string(s.Chat.Type)
	if s.Chat.Type != models.ChatTypePrivate || s.DraftID == 0 {
		return
	}
	u.Kind, u.Sender, u.DraftID = message.StopPressed, s.Chat.ID, int64(s.DraftID)
}

// kindName is the field that names a raw update's kind ("edited_message",
// "callback_query", ...).
func kindName(raw []byte) string {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &fields) // it decoded as an update
	for k := range fields {
		if k != "update_id" {
			return k
		}
	}
	return "empty"
}

// readMessage reads a message someone sent. One without a sender (a
// channel's post in a group it is linked to, say) is not for a bot.
func readMessage(u *message.Update, msg *models.Message, me message.Identity) {
	u.ChatType, u.MessageID = string(msg.Chat.Type), msg.ID
	if msg.From == nil {
		return
	}
	u.Kind = message.Written
	u.Sender, u.FirstName, u.Language = senderID(msg), msg.From.FirstName, msg.From.LanguageCode
	u.Command, u.ForOtherBot = parseCommand(msg.Text, msg.Entities, me.Username)
	if file, ok := mediaOf(msg); ok {
		file.Album = msg.MediaGroupID
		u.Media, u.Album = []message.Attachment{file}, msg.MediaGroupID
	}
	u.ReplyTo = readReply(msg, me)
	if !u.InGroup() {
		u.Text = cmp.Or(msg.Text, msg.Caption)
		return
	}
	u.SenderName = senderName(msg)
	u.Text, u.Mentioned = withoutMentions(msg, me)
	u.RepliesToMe = msg.ReplyToMessage != nil && msg.ReplyToMessage.From != nil && msg.ReplyToMessage.From.ID == me.ID
}

// withoutMentions returns a group message's text (or caption) without the
// bot's own mentions (@bot, or a text_mention of it), and whether it had
// any.
func withoutMentions(msg *models.Message, me message.Identity) (text string, mentioned bool) {
	text, entities := msg.Text, msg.Entities
	if text == "" {
		text, entities = msg.Caption, msg.CaptionEntities
	}
	units := utf16.Encode([]rune(text))
	var keep []uint16
	last := 0
	for _, e := range entities {
		start, end, ok := entitySpan(units, e)
		if !ok || start < last {
			continue
		}
		span := string(utf16.Decode(units[start:end]))
		isMe := e.Type == models.MessageEntityTypeMention && strings.EqualFold(span, "@"+me.Username) ||
			e.Type == models.MessageEntityTypeTextMention && e.User != nil && e.User.ID == me.ID
		if !isMe {
			continue
		}
		mentioned = true
		keep = append(keep, units[last:start]...)
		last = end
	}
	keep = append(keep, units[last:]...)
	return strings.Join(strings.Fields(string(utf16.Decode(keep))), " "), mentioned
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
	return strings.TrimSpace(msg.From.FirstName + " " + msg.From.LastName)
}

// parseCommand reads the bot command that starts text, recognised only by
// its bot_command entity as Telegram marks it: "/reset@mybot now" is
// "reset". A command addressed to another bot is reported as such.
func parseCommand(text string, entities []models.MessageEntity, username string) (cmd string, forOtherBot bool) {
	units := utf16.Encode([]rune(text))
	for _, e := range entities {
		start, end, ok := entitySpan(units, e)
		if e.Type != models.MessageEntityTypeBotCommand || !ok || start != 0 || end < 2 {
			continue
		}
		word := string(utf16.Decode(units[1:end]))
		name, target, addressed := strings.Cut(word, "@")
		if addressed && !strings.EqualFold(target, username) {
			return "", true
		}
		return strings.ToLower(name), false
	}
	return "", false
}

// contentKeys are the fields of a message a person sends on purpose;
// a message without text, caption or any of these is a service message
// (a member joined, the background changed...).
var contentKeys = []string{"photo", "video", "audio", "voice", "document", "sticker", "animation",
	"video_note", "paid_media", "location", "venue", "contact", "poll", "dice", "story", "checklist"}

// readUnreadable reads who wrote a "message" update the library cannot
// decode (a type newer than it, or a field of another JSON type than it
// expects), and where, as far as the JSON allows: only a message someone
// wrote has a sender to tell. Its text is read only to see whether it
// mentions the bot, and never kept. A tap (callback_query) keeps its
// query, to be answered, and who tapped; nothing else it names is read.
func readUnreadable(u *message.Update, raw []byte, me message.Identity, err error) {
	u.Kind, u.What, u.Problem = message.Unreadable, "message", err
	var loose struct {
		Message map[string]json.RawMessage `json:"message"`
		Tap     *struct {
			ID   string `json:"id"`
			From struct {
				ID    int64 `json:"id"`
				IsBot bool  `json:"is_bot"`
			} `json:"from"`
		} `json:"callback_query"`
	}
	var head struct {
		Chat struct {
			Type string `json:"type"`
		} `json:"chat"`
		From *struct {
			ID int64 `json:"id"`
		} `json:"from"`
		Text    string `json:"text"`
		Caption string `json:"caption"`
	}
	if decodeLoosely(raw, &loose) != nil || loose.Message == nil {
		u.What = kindName(raw)
		if q := loose.Tap; q != nil && q.ID != "" && q.From.ID != 0 {
			u.Sender, u.Tap = q.From.ID, message.Tap{QueryID: q.ID, Inaccessible: true, FromBot: q.From.IsBot}
		}
		return
	}
	msg, _ := json.Marshal(loose.Message)
	if decodeLoosely(msg, &head) != nil || head.From == nil || head.From.ID == 0 {
		return
	}
	// Text or a caption of another type is still something written.
	written := slices.ContainsFunc(append([]string{"text", "caption"}, contentKeys...), func(k string) bool {
		_, ok := loose.Message[k]
		return ok
	})
	if written {
		u.ChatType, u.Sender = head.Chat.Type, head.From.ID
		u.Mentioned = mentions(head.Text+" "+head.Caption, me.Username)
	}
}

// mentions reports whether text names @username.
func mentions(text, username string) bool {
	return username != "" && strings.Contains(strings.ToLower(text), "@"+strings.ToLower(username))
}
