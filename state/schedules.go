package state

import (
	"context"
	"errors"
	"time"

	"brainbot/message"
)

// Reminders keeps the reminders users asked a persona for. A scheduler
// appends each due one to the log (message.Scheduled) and then marks it
// done; they go with the user's other data when the user is forgotten,
// and when the user blocks the bot (EndSchedule).
type Reminders interface {
	// AddReminder keeps r, unless its user has limit (> 0) reminders
	// with its bot already, in any chat (ErrRemindersFull); adds at once
	// never pass the bound. The backend gives r its ID (unique among every
	// reminder ever kept, short: the model names it to cancel it) and
	// returns it, its times to the millisecond (what a backend keeps).
	AddReminder(ctx context.Context, r Reminder, limit int) (Reminder, error)
	// Reminders lists user's pending reminders with bot, the soonest first
	// (two due at once: the first kept first).
	Reminders(ctx context.Context, bot string, user int64) ([]Reminder, error)
	// CancelReminder deletes user's pending reminder id with bot; false if
	// there is none (it fired already, or was cancelled).
	CancelReminder(ctx context.Context, bot string, user int64, id string) (bool, error)
	// DueReminders lists the pending reminders of every bot due at now or
	// earlier, the soonest first, at most limit (> 0; 0: all).
	DueReminders(ctx context.Context, now time.Time, limit int) ([]Reminder, error)
	// DoneReminder deletes reminder id once it is in the log (or dropped
	// as too late); deleting one already gone is no error.
	DoneReminder(ctx context.Context, bot, id string) error
}

// Reminder is one a user asked for: at Due the persona writes to them in
// Key's chat about Text.
type Reminder struct {
	ID   string
	Key  message.Key
	User int64
	// Text is what to remind of, in the user's words.
	Text    string
	Due     time.Time
	Created time.Time
}

// Contacts keeps what the check-ins of each user with a bot go by: when
// the user last wrote in their private chat, their time zone, the
// check-ins sent, whether they said no, whether they blocked the bot.
type Contacts interface {
	// Contact is user's with bot; ok is false if they never wrote to it
	// privately (a check-in writes to no one else). c holds what is kept
	// even then: a time zone set in a group, a no said there.
	Contact(ctx context.Context, bot string, user int64) (c Contact, ok bool, err error)
	// Wrote records that user wrote to bot in their private chat at now
	// (they reached out: a block is over). Wrote never moves back.
	Wrote(ctx context.Context, bot string, user int64, now time.Time) error
	// SetTimeZone keeps user's IANA time zone with bot ("" for the
	// brain's default).
	SetTimeZone(ctx context.Context, bot string, user int64, zone string) error
	// DeclineCheckIns records user's no (or, false, their yes again).
	DeclineCheckIns(ctx context.Context, bot string, user int64, declined bool) error
	// CheckedIn records a check-in appended for user at at; the contact
	// keeps those of the 7 days up to its latest (CheckInsKept).
	CheckedIn(ctx context.Context, bot string, user int64, at time.Time) error
	// EndSchedule: the user blocked bot (Telegram's 403). Their pending
	// reminders with it (in every chat) are deleted and no check-in goes
	// to them until they write again (Wrote); the rest of their contact
	// stays.
	EndSchedule(ctx context.Context, bot string, user int64) error
	// QuietContacts lists bot's contacts who wrote to it privately, and
	// neither wrote nor were checked in with at since or later, neither
	// declined nor blocked, the longest quiet first (by the later of
	// their last message and last check-in; then by user), at most limit
	// (> 0; 0: all).
	QuietContacts(ctx context.Context, bot string, since time.Time, limit int) ([]Contact, error)
}

// Contact is what check-ins know of one user with one bot.
type Contact struct {
	Bot  string
	User int64
	// Zone is the user's IANA time zone ("": the brain's default).
	Zone string
	// Wrote is when the user last wrote in their private chat.
	Wrote time.Time
	// CheckIns are the check-ins appended for them in the 7 days up to
	// the latest (CheckInsKept), the oldest first.
	CheckIns []time.Time
	Declined bool
	Blocked  bool
}

// CheckInsKept is how long a contact keeps the check-ins sent: a brain
// bounds them per week.
const CheckInsKept = 7 * 24 * time.Hour

// ErrRemindersFull is AddReminder's answer when the user has as many
// reminders pending as the brain allows.
var ErrRemindersFull = errors.New("store: the user's reminders are at their bound")
