// Package message is brainbot's own words for what comes from a chat and
// what goes back to it: where a message belongs (Key), who a bot is
// (Identity), an update as it was received (Envelope) and as it reads
// (Update). It holds no Telegram library types, so the transport, the
// intake and the conversation speak it without knowing one another, and
// the state contract keeps them without knowing the Telegram side: a
// room of its own, below both.
package message

import (
	"strconv"
	"time"
)

// Key names a conversation: a bot's chat, and in a forum supergroup one
// topic of it (Thread, 0 elsewhere), or one caller's guest messages in a
// chat (GuestKey: a negative Thread). A conversation's messages are
// answered one at a time, in order, in one Claude session. A Key is built
// from an update in one place only (the transport's decoding), and named
// as a string only by String.
type Key struct {
	Bot    string
	Chat   int64
	Thread int
}

// GuestKey is the conversation of caller's guest messages in chat (the
// bot summoned where it is not a member): the pair (caller, chat), apart
// from the chat's own conversations and from every other caller's. A
// chat id alone is not enough: in a private chat Telegram names the chat
// by the other party, so the chats of many callers with one person, and
// the bot's own chat with that person, share an id.
//
// The caller is kept in Thread, as a number no forum topic has (topics
// are positive), so every store, subject and process name made of (bot,
// chat, thread) keeps guests apart with no schema of its own: -caller for
// a user, and below -2^52 for a chat (an anonymous admin, a channel):
// Telegram's user and chat ids have at most 52 significant bits.
func GuestKey(bot string, chat, caller int64) Key {
	thread := -caller
	if caller <= 0 {
		thread = caller - 1<<52
	}
	return Key{Bot: bot, Chat: chat, Thread: int(thread)}
}

// User is the one user the conversation is with: a private chat's other
// party, or a guest conversation's caller; 0 for a group's, a channel's or
// an anonymous caller's.
func (k Key) User() int64 {
	switch {
	case k.Thread < 0 && k.Thread > -(1<<52):
		return int64(-k.Thread)
	case k.Thread >= 0 && k.Chat > 0:
		return k.Chat
	}
	return 0
}

// IsUsers reports whether k is one of user's conversations with bot
// ("": with any bot): the private chat, or a guest conversation user
// called the bot into.
func (k Key) IsUsers(bot string, user int64) bool {
	return k.User() == user && (bot == "" || k.Bot == bot)
}

// String is the key as one word, "bot/chat/thread": how the Claude driver
// tells its warm CLI processes apart.
func (k Key) String() string {
	return k.Bot + "/" + strconv.FormatInt(k.Chat, 10) + "/" + strconv.Itoa(k.Thread)
}

// Identity is a bot as Telegram knows it (getMe): its user id and
// @username.
type Identity struct {
	ID       int64
	Username string
	// GuestQueries: guest mode is on for the bot (@BotFather); known
	// from getMe only, never kept with an update.
	GuestQueries bool
}

// Envelope is one update as the transport received it, before anyone
// read it: its bytes exactly as Telegram sent them, so a kind this
// release does not know travels intact to whoever reads it later. The
// intake's logs (the embedded journal, the cluster's stream) keep it.
type Envelope struct {
	// Bot is the brain id of the bot the update came to.
	Bot string
	// Me is the bot as the poller knew it when the update came (zero when
	// it did not: then the reader takes the bot's identity as it is now).
	Me       Identity
	UpdateID int64
	// Key is the conversation the update belongs to (zero Chat for an
	// update outside any chat).
	Key      Key
	Raw      []byte
	Received time.Time
	// Accepted: the update was taken in by a release that journaled only
	// the messages it had accepted for the bot (and not the update as
	// received): it is the bot's to answer, however it reads now.
	Accepted bool
	// Scheduled is set for what brainbot appended itself (a reminder, a
	// check-in), with no Raw, no UpdateID and no poller's offset; nil for
	// an update from Telegram.
	Scheduled *Scheduled
}

// Kind is what an update is to brainbot.
type Kind int

const (
	// Unhandled is an update brainbot does not answer: an edit, a
	// reaction, a channel post... It is only confirmed.
	Unhandled Kind = iota
	// Written is a message someone sent: text, a caption, files.
	Written
	// Membership is the bot added to a chat or removed from it.
	Membership
	// Unreadable is an update that could not be decoded (a union type
	// newer than the transport's library): what could be read of its
	// sender is kept, to tell them.
	Unreadable
	// StopPressed is the stop button of a streamed answer's draft pressed
	// (stopped_message_generation, private chats): DraftID names the draft.
	StopPressed
	// Tapped is a tap on one of the bot's buttons (Update.Tap).
	Tapped
	// Edited is a message someone sent, edited (edited_message): read as
	// Written is, with the same MessageID.
	Edited
)

// Update is an update as brainbot reads it.
type Update struct {
	Kind Kind
	// What names the kind as Telegram does ("message", "edited_message",
	// ...), for the logs.
	What string
	ID   int64
	Key  Key
	// ChatType is Telegram's: "private", "group", "supergroup", "channel"
	// ("" outside a chat).
	ChatType  string
	MessageID int
	// Sender is who wrote it, for everything kept per sender: a user's
	// id, or for a message sent on behalf of a chat (a group's anonymous
	// admins, a channel) that chat's negative id.
	Sender int64
	// SenderName is how a group message's author is shown to the model;
	// FirstName and Language are the author's, for the system prompt.
	SenderName, FirstName, Language string
	// Text is what was written (a caption for a file); in groups without
	// the bot's own @mentions.
	Text string
	// Command is the bot command the text starts with, without "/" and
	// "@bot" ("" for none); ForOtherBot: it names another bot.
	Command     string
	ForOtherBot bool
	// Mentioned: the text names the bot; RepliesToMe: it answers one of
	// the bot's messages.
	Mentioned, RepliesToMe bool
	// Media are the files the message carries; Album groups the messages
	// of one album (Telegram's media_group_id).
	Media []Attachment
	Album string
	// Member is the change a Membership update reports.
	Member MemberChange
	// Tap is what a Tapped update says of the tap.
	Tap Tap
	// Problem is why an Unreadable update could not be read.
	Problem error
	// DraftID is the draft whose stop button a StopPressed update reports.
	DraftID int64
	// ReplyTo is what a Written message replies to (nil: nothing, or a
	// message without text).
	ReplyTo *Reply
	// Guest is set for a message that summoned the bot in a chat it is
	// not a member of (guest_message): it is answered once, through the
	// query. Sender is the user who summoned it.
	Guest *Guest
	// Scheduled is set for a reminder or a check-in brainbot appended
	// itself (Envelope.Scheduled): a Written update of the user's private
	// chat, with no text of theirs, answered as the persona writing first.
	Scheduled *Scheduled
}

// Guest is the query a guest message is answered through.
type Guest struct {
	QueryID string
}

// Reply is the message another replies to, as the model is told of it:
// someone's words, never instructions.
type Reply struct {
	// Author is who wrote it, as Telegram names them ("" when it does
	// not); Mine: the bot itself.
	Author string
	Mine   bool
	// Text is the part the user quoted (Quoted), else the message's text
	// or caption, whole.
	Text   string
	Quoted bool
}

// MemberChange is the bot's new standing in a chat.
type MemberChange struct {
	Status string // Telegram's: member, administrator, left, kicked...
	Left   bool   // removed from the chat (left or banned)
	By     int64  // the user who changed it
}

// InGroup reports whether the update comes from a group or supergroup.
func (u *Update) InGroup() bool { return u.ChatType == "group" || u.ChatType == "supergroup" }

// Private reports whether the update comes from a private chat.
func (u *Update) Private() bool { return u.ChatType == "private" }

// Addressed reports whether a message speaks to the bot on its own:
// it mentions the bot, replies to one of its messages, or is a command
// for it. In a group under "groups: mention", only such messages are the
// bot's.
func (u *Update) Addressed() bool {
	return u.Mentioned || u.RepliesToMe || u.Command != "" && !u.ForOtherBot
}

// Command is a bot command as the bot lists it (setMyCommands, /help).
type Command struct {
	Name, Description string
}
