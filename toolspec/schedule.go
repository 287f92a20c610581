package toolspec

import (
	"fmt"
	"strings"
	"time"
)

// The schedule tools: the model keeps a reminder the user asks for,
// lists and cancels them, and keeps the user's time zone. Served beside
// the memory tools, by the same server and scope (the request's bot and
// user, never the model's arguments).
const (
	RemindToolName         = "remind"
	ListRemindersToolName  = "list_reminders"
	CancelReminderToolName = "cancel_reminder"
	SetTimeZoneToolName    = "set_time_zone"
	// RemindTool and the others are the tools as Claude sees them.
	RemindTool         = "mcp__" + MemoryServer + "__" + RemindToolName
	ListRemindersTool  = "mcp__" + MemoryServer + "__" + ListRemindersToolName
	CancelReminderTool = "mcp__" + MemoryServer + "__" + CancelReminderToolName
	SetTimeZoneTool    = "mcp__" + MemoryServer + "__" + SetTimeZoneToolName
)

// The bounds of a brain's reminders (reminders.max_pending,
// reminders.max_ahead): the defaults, and the most a brain may allow
// (/reminders shows a button per reminder under one message).
const (
	DefaultMaxPending = 20
	MaxMaxPending     = 50
	DefaultMaxAhead   = 365 * 24 * time.Hour
	// MaxReminderChars bounds what one reminder says.
	MaxReminderChars = 500
)

// LocalTimeLayout is how the model writes a time in the user's zone, and
// how it is told the user's time now.
const LocalTimeLayout = "2006-01-02 15:04"

// RemindArgs are the arguments of remind.
type RemindArgs struct {
	At   string `json:"at"`
	Text string `json:"text"`
}

// The descriptions, telling the model when to call each tool and how.
const (
	RemindDescription = "Keep a reminder the user asks you for (\"remind me at 9 tomorrow to call mom\"): at its time you " +
		"will be asked to write it to them, in your own words. at is when, as a date and time in the user's time zone, " +
		"\"YYYY-MM-DD HH:MM\" (the user's local time now is in brainbot's note at the start of their message), or an " +
		"RFC 3339 time with its offset. text is what to remind them of, in their words. Call it only when the user asks " +
		"for a reminder, then tell them when it will come."
	ListRemindersDescription  = "List the user's pending reminders, each with its id and time in their time zone."
	CancelReminderDescription = "Cancel one of the user's pending reminders, by its id (from remind's answer or list_reminders), " +
		"when they take it back."
	SetTimeZoneDescription = "Keep the user's time zone, as an IANA name such as Europe/Berlin or America/New_York, when they " +
		"tell you where they live or what time it is for them. Their reminders and your check-ins go by it."
)

// The tools' answers, in words the model can act on.
const (
	// ScheduleNotHere: the request may not keep reminders (a group, a
	// brain without them).
	ScheduleNotHere = "Reminders and time zones are kept only in private chats with this bot, when it keeps them: " +
		"nothing was kept. Do not tell the user you will remind them."
	NoReminder         = "There is no pending reminder with this id: nothing was cancelled. list_reminders lists them."
	ReminderTextNeeded = "text is required: what to remind the user of. Nothing was kept."
)

// RemindBadTime is remind's answer to an at it cannot read.
func RemindBadTime(at string) string {
	return fmt.Sprintf("%q is not a time: nothing was kept. Write at as \"YYYY-MM-DD HH:MM\" in the user's time zone, "+
		"or as RFC 3339 with an offset (2026-03-01T09:00:00+01:00).", at)
}

// RemindPast is remind's answer to a time already past.
func RemindPast(now string) string {
	return "That time is past (the user's time now is " + now + "): nothing was kept. Ask the user when they meant."
}

// RemindTooFar is remind's answer to a time past the brain's bound.
func RemindTooFar(limit string) string {
	return "That is further ahead than this bot keeps reminders (" + limit + "): nothing was kept. Tell the user."
}

// RemindersFull is remind's answer when the user's reminders are at the
// bound.
func RemindersFull(n int) string {
	return fmt.Sprintf("The user has %d reminders waiting, the most this bot allows: nothing was kept. Tell them; they can "+
		"cancel one with /reminders.", n)
}

// ReminderTooLong is remind's answer to a text past MaxReminderChars.
func ReminderTooLong() string {
	return fmt.Sprintf("text is longer than %d characters: nothing was kept. Shorten it.", MaxReminderChars)
}

// ReminderKept is remind's answer: its id and when, in the user's words.
func ReminderKept(id, when string) string {
	return "Reminder " + id + " kept for " + when + "."
}

// ReminderCancelled is cancel_reminder's answer.
func ReminderCancelled(id string) string { return "Reminder " + id + " cancelled." }

// BadTimeZone is set_time_zone's answer to a name that is no IANA zone.
func BadTimeZone(zone string) string {
	return fmt.Sprintf("%q is not an IANA time zone name: nothing was kept. Use a name such as Europe/Berlin, "+
		"America/New_York or Asia/Tokyo (the zone of the user's city).", zone)
}

// TimeZoneKept is set_time_zone's answer, with the user's time now there.
func TimeZoneKept(zone, now string) string {
	return "Kept: the user's time zone is " + zone + "; their time now is " + now + "."
}

// Span says a duration as people do: whole days from two days on, else
// Go's short form without its zero parts ("2h", "90m", "2s").
func Span(d time.Duration) string {
	if d >= 48*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	s := d.String()
	for _, zero := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(s, zero) {
			s = strings.TrimSuffix(s, zero[1:])
		}
	}
	return s
}
