package message

import "time"

// Scheduled is a message brainbot writes into its own log for a user: a
// reminder or a check-in that came due. It goes through the log as an
// update from Telegram does, so it is answered in its conversation's
// order, by the instance answering that conversation, and once: a log
// keeps one entry per (bot, ID) however often, and by whichever instance,
// it is appended within a day of the first, answered or not, so every
// instance's scheduler may append what it finds due. The logs keep it as
// JSON, by the names below: renaming a field loses the entries stored.
type Scheduled struct {
	Kind ScheduledKind `json:"kind"`
	// ID names it in the log (a reminder's id; a check-in's is made of
	// the user and the slot it fills).
	ID string `json:"id"`
	// User is whom it is for (the conversation's key is the Envelope's).
	User int64 `json:"user"`
	// Text is the reminder as the user asked for it (empty for a
	// check-in): the user's words, which reach the model as words.
	Text string `json:"text,omitempty"`
	// Due is when it came due.
	Due time.Time `json:"due"`
}

// ScheduledKind says what a Scheduled message is.
type ScheduledKind int

const (
	// Reminder is one the user asked for.
	Reminder ScheduledKind = iota + 1
	// CheckIn is the persona writing first to a user who has been quiet.
	CheckIn
)
