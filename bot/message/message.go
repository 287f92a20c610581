// Package message is brainbot's own words for what comes from a chat and
// what goes back to it: where a message belongs (Key), who a bot is
// (Identity), an update as it was received (Envelope) and as it reads
// (Update). It holds no Telegram library types, so the transport, the
// intake and the conversation speak it without knowing one another.
package message

import "strconv"

// Key names a conversation: a bot's chat, and in a forum supergroup one
// topic of it (Thread, 0 elsewhere). A conversation's messages are
// answered one at a time, in order, in one Claude session. A Key is built
// from an update in one place only (the transport's decoding), and named
// as a string only by String.
type Key struct {
	Bot    string
	Chat   int64
	Thread int
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
}
