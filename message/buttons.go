package message

// Tap is a tap on an inline button under one of the bot's messages (a
// callback query); the Update's MessageID is that message, its Key the
// conversation it is in.
type Tap struct {
	// QueryID is Telegram's: every tap must be answered with it, or the
	// user's client shows a spinner for a while.
	QueryID string
	// Data is the button's callback data as the bot set it, or as someone
	// forged it: opaque, and worth nothing until resolved.
	Data string
	// Inaccessible: Telegram no longer gives the message the button is
	// under (an old one: date 0), or it is in no chat the bot knows (an
	// inline message).
	Inaccessible bool
	// FromBot: a bot tapped.
	FromBot bool
	// ChatTitle is the title of the group the message is in: the name a
	// tap made for the group's anonymous admins speaks under.
	ChatTitle string
}

// Button is an inline button: its label, and the data a tap on it sends
// back (1 to 64 bytes).
type Button struct {
	Text, Data string
}

// Keyboard is the buttons under a message, in rows.
type Keyboard [][]Button
