package state

import (
	"crypto/rand"
	"encoding/base64"
	"time"

	"brainbot/message"
)

// Session is a conversation's Claude session.
type Session struct {
	ID       string
	Created  time.Time
	LastUsed time.Time
}

// RecentSession is a conversation's current session, for the prewarm
// after a start.
type RecentSession struct {
	Conversation message.Key
	Session
}

// PastSession is a session replaced by a reset or a lost-session restart.
type PastSession struct {
	ID      string
	Created time.Time
	Ended   time.Time
}

// NextReset is when the counters of t's day reset: the next UTC midnight.
func NextReset(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// Buttons are what the buttons under one of a bot's messages mean: a tap
// sends only their ID and the button's place (callback data is at most 64
// bytes, and anyone can forge it), so the rest lives in the backend, where
// a restart or another instance of a cluster finds it.
type Buttons struct {
	// ID is random and opaque (NewButtonsID).
	ID string
	// Kind is the buttons' job: ButtonsQuestion, ButtonsRead, ButtonsStop.
	Kind string
	// Conversation and MessageID are the message they are under
	// (MessageID 0 until it is sent: PlaceButtons).
	Conversation message.Key
	MessageID    int
	// User may tap them: the user who was asked, or who asked (0: anyone
	// the brain allows).
	User int64
	// Options are a question's options, one button each, in order.
	Options []string
	// Text is what the message says: a question's text (to show the
	// choice under it), an answer's (to read it aloud).
	Text    string
	Created time.Time
	// UsedBy is the update of the tap that used them (0: not used;
	// ButtonsClosed: the question was answered in words or replaced).
	UsedBy int64
	// File is the voice note a read-aloud tap made (for a second tap).
	File string
}

// The kinds of Buttons.
const (
	ButtonsQuestion = "question"
	ButtonsRead     = "read"
	ButtonsStop     = "stop"
)

// ButtonsClosed is Buttons.UsedBy of a question the user answered in
// words, or the bot replaced with another.
const ButtonsClosed = -1

// NewButtonsID is a new random Buttons.ID: 16 URL-safe characters, so the
// callback data of a button (ID, ".", place) stays far below 64 bytes.
func NewButtonsID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// PanelRun is one panel run as journaled: where it runs and its whole
// state (Run, the panel engine's JSON), saved after every step.
type PanelRun struct {
	ID        string
	Chat      int64
	Thread    int
	MessageID int // the /panel message that started it
	Run       []byte
	Created   time.Time
}

// Usage is what one request cost.
type Usage struct {
	At        time.Time
	Bot       string
	Chat      int64
	User      int64
	RequestID string
	Mode      string
	Outcome   string
	// Model tokens, as the Claude CLI reported them.
	InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens int64
	// ClaudeUSD is what the CLI reported; OpenAIUSD what speech, images and
	// transcription cost by package pricing's table.
	ClaudeUSD, OpenAIUSD float64
}

// UsageFilter selects what a usage report sums.
type UsageFilter struct {
	Since time.Time
	// Bot limits the report to one bot ("": all).
	Bot string
	// ByUser reports each user apart.
	ByUser bool
}

// UsageLine is one row of a usage report: a bot (and user) with one reply
// mode.
type UsageLine struct {
	Bot  string
	User int64 // 0 unless ByUser
	Mode string
	// Requests counts the requests, Errors those whose outcome was error.
	Requests, Errors                                             int64
	InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens int64
	ClaudeUSD, OpenAIUSD                                         float64
}

// Add adds o's counts and costs to l (its bot, user and mode stay).
func (l *UsageLine) Add(o UsageLine) {
	l.Requests += o.Requests
	l.Errors += o.Errors
	l.InputTokens += o.InputTokens
	l.OutputTokens += o.OutputTokens
	l.CacheReadTokens += o.CacheReadTokens
	l.CacheWriteTokens += o.CacheWriteTokens
	l.ClaudeUSD += o.ClaudeUSD
	l.OpenAIUSD += o.OpenAIUSD
}

// Line is one usage record as a line of a usage report.
func (u Usage) Line() UsageLine {
	l := UsageLine{Bot: u.Bot, User: u.User, Mode: u.Mode, Requests: 1,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, ClaudeUSD: u.ClaudeUSD, OpenAIUSD: u.OpenAIUSD}
	if u.Outcome == "error" {
		l.Errors = 1
	}
	return l
}

// Retention bounds what a backend keeps that no request reads any more.
// A zero field keeps that kind of record for ever.
type Retention struct {
	// DailyDays is how many UTC days of message counters are kept, today
	// included. Limits read only today's.
	DailyDays int
	// History is how long an ended session stays in the session history
	// after it ended.
	History time.Duration
	// Usage is how long a request's usage record is kept (for reports).
	Usage time.Duration
	// Buttons is how long what a message's buttons mean is kept; a tap on
	// older ones is told they expired.
	Buttons time.Duration
}

// DefaultRetention keeps today's and yesterday's counters, ended sessions
// for 90 days (brainbot never resumes them; they are there for an admin
// looking into a past conversation) and usage records for 400 days (a
// year's reports), and buttons as long as a brain may keep them working
// (MaxButtonsAge).
var DefaultRetention = Retention{DailyDays: 2, History: 90 * 24 * time.Hour, Usage: 400 * 24 * time.Hour, Buttons: MaxButtonsAge}

// MaxButtonsAge is the longest a brain may keep its buttons working
// (buttons.max_age); the cluster's bucket keeps them as long.
const MaxButtonsAge = 30 * 24 * time.Hour

// Pruned counts the records Prune deleted.
type Pruned struct {
	Daily, History, Usage, Buttons int64
}

// ConversationFilter selects conversations; a zero field selects all.
type ConversationFilter struct {
	Bot  string
	User int64 // message.Key.User
}

// Conversation is one conversation with its current session.
type Conversation struct {
	Key     message.Key
	Session Session
}

// Forgotten is what a ForgetUser deleted.
type Forgotten struct {
	Bot  string // "": every bot
	User int64
	// Conversations are the conversations deleted, and Sessions the ids
	// of their sessions, current and past: their transcripts go.
	Conversations []message.Key
	Sessions      []string
	// Notes counts the notes about the user deleted (Memories), and
	// Reminders their pending reminders (with their contact, Contacts).
	Notes     int
	Reminders int
}

// Note is one note a persona keeps about a user (Memories): a few words
// the model chose to remember.
type Note struct {
	// ID names the note among the user's notes with the bot: short, for
	// the model to name the note it drops and for a button's data.
	ID      string
	Text    string
	Created time.Time
}
