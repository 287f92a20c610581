// Package state says what a backend of brainbot's state is: the values it
// keeps, the errors it answers with and what they mean, and one small
// interface for each thing it keeps. Consumers take only the interfaces
// they use; cmd/brainbot chooses the one implementation a process runs
// on:
//
//   - state/sqlite: one process, one SQLite file;
//   - state/jetstream: instances sharing the bots through NATS JetStream.
//
// Both pass the same conformance suite (state/statetest), so nothing above
// a backend asks which one it is: the embedded one grants every lease at
// once and keeps transcripts where the CLI already keeps them.
package state

import (
	"context"
	"time"

	"brainbot/message"
)

// Backend is everything a backend keeps.
type Backend interface {
	Log
	Leases
	Sessions
	Arrivals
	Voices
	Counters
	Spending
	ButtonSets
	Panels
	Holders
	Transcripts
	Maintenance
	Conversations
	Memories
	Reminders
	Contacts
}

// Log keeps the bots' updates until they are answered.
type Log interface {
	// Append stores env durably, and poller's offset with it: polling
	// confirms an update to Telegram only once it is stored. A message
	// brainbot appends itself (env.Scheduled) has no poller (""): it is
	// stored once per bot and id (message.Scheduled) and handed over as
	// an update is, with its Scheduled whole and no Raw.
	Append(ctx context.Context, poller string, env message.Envelope) error
	// Offset is the last update id poller stored (0 if none).
	Offset(ctx context.Context, poller string) (int64, error)
	// Consume hands every update stored to handle, in order per
	// conversation, until ctx ends: first what an earlier process left.
	// handle never blocks; it is not called inside Append.
	Consume(ctx context.Context, handle func(message.Delivery))
}

// Leases says which instance polls each bot.
type Leases interface {
	// Lease runs poll while this instance holds bot's poller lease, until
	// ctx ends or poll returns an error, which Lease returns (nil when ctx
	// ended). A backend of one process holds every lease: poll runs at
	// once. A shared one waits while another instance holds the lease,
	// ends poll's context when the lease is lost and waits for it again
	// (also after a poll that returned nil before ctx ended).
	Lease(ctx context.Context, bot string, poll func(ctx context.Context) error) error
}

// Sessions keeps each conversation's Claude session.
type Sessions interface {
	// Session is the conversation's current session; ok is false if it
	// has none.
	Session(ctx context.Context, c message.Key) (s Session, ok bool, err error)
	// UseSession makes id the conversation's session, used at now (a new
	// id replaces the one before).
	UseSession(ctx context.Context, c message.Key, id string, now time.Time) error
	// ResetSession ends the conversation's session: the next message
	// starts a new one. ended is the session it had ("" for none).
	ResetSession(ctx context.Context, c message.Key, now time.Time) (ended string, err error)
	// RecentSessions lists the current sessions used at since or later,
	// the most recently used first, at most limit (a shared backend: of
	// the conversations this instance answers).
	RecentSessions(ctx context.Context, since time.Time, limit int) ([]RecentSession, error)
}

// Arrivals tells an instance when conversations another one answered
// become its own.
type Arrivals interface {
	// WatchArrivals calls fn, until ctx ends, each time conversations
	// another instance answered become this one's (that instance died,
	// stopped, or the work was spread again), with the current sessions
	// among them used at since() or later, the most recently used first,
	// at most limit. A backend of one process answers every conversation:
	// it returns at once.
	WatchArrivals(ctx context.Context, since func() time.Time, limit int, fn func([]RecentSession))
}

// Voices keeps each user's /voice choice per bot.
type Voices interface {
	// Voice is user's choice with bot; set is false if they made none.
	Voice(ctx context.Context, bot string, user int64) (on, set bool, err error)
	SetVoice(ctx context.Context, bot string, user int64, on bool) error
}

// Counters counts each user's messages per bot and UTC day.
type Counters interface {
	// TakeDaily counts one message of user's today unless limit (> 0) are
	// counted already; then ok is false and resetAt is when the count
	// starts again (NextReset).
	TakeDaily(ctx context.Context, bot string, user int64, limit int, now time.Time) (ok bool, resetAt time.Time, err error)
	// DailyCount is how many messages of user's are counted today.
	DailyCount(ctx context.Context, bot string, user int64, now time.Time) (int, error)
}

// Spending keeps what requests cost.
type Spending interface {
	RecordUsage(ctx context.Context, u Usage) error
	// SpentToday is what user's requests to bot cost today (UTC), both
	// providers.
	SpentToday(ctx context.Context, bot string, user int64, now time.Time) (float64, error)
	// UsageReport sums the usage f selects per bot (and user) and mode.
	UsageReport(ctx context.Context, f UsageFilter) ([]UsageLine, error)
}

// ButtonSets keeps what the buttons under the bots' messages mean.
type ButtonSets interface {
	// SaveButtons records b. A question closes the conversation's
	// questions still open: only the latest may be answered by a tap.
	SaveButtons(ctx context.Context, b Buttons) error
	// PlaceButtons records the message the buttons went out under.
	PlaceButtons(ctx context.Context, id string, messageID int) error
	// LookupButtons returns the buttons with id; ok is false for none.
	LookupButtons(ctx context.Context, id string) (b Buttons, ok bool, err error)
	// UseButtons marks the buttons used by the tap in update, once: false
	// if they were used (or closed) already.
	UseButtons(ctx context.Context, id string, update int64) (bool, error)
	// CloseQuestions closes the conversation's open questions asked of
	// user (user 0: every open question) and returns them. A question open
	// to anyone is closed by user 0 alone.
	CloseQuestions(ctx context.Context, c message.Key, user int64) ([]Buttons, error)
	// KeepButtonsFile records the voice note a read-aloud tap made.
	KeepButtonsFile(ctx context.Context, id, path string) error
}

// Panels journals panel runs.
type Panels interface {
	// StartPanel records a new running run, unless one exists for the same
	// /panel message (ErrPanelStarted) or one still runs in the chat
	// (ErrPanelBusy). A start refused claims nothing.
	StartPanel(ctx context.Context, r PanelRun) error
	// SavePanel stores the run's state after a step; finished ends it.
	SavePanel(ctx context.Context, id string, run []byte, finished bool, now time.Time) error
	// RunningPanels lists the runs left running that this instance may
	// take up (an earlier process's, or a dead instance's).
	RunningPanels(ctx context.Context) ([]PanelRun, error)
}

// Holders remembers which brain has each Telegram bot, by the number its
// token starts with, so that after a restart a token stays with the brain
// that had it.
type Holders interface {
	HoldTelegramBot(ctx context.Context, number, brain string, now time.Time) error
	TelegramBotHolders(ctx context.Context) (map[string]string, error)
}

// Transcripts keeps the CLI's session transcripts where the next answer
// of their conversation finds them.
type Transcripts interface {
	// Restore brings the latest stored transcript here unless the local
	// copy is it; release is called before it writes (a warm CLI holding
	// the old copy must be gone first). An error: the message must wait
	// (ErrUnavailable) or fail, never resume on a partial history.
	Restore(ctx context.Context, bot, session string, release func()) error
	// Save stores the local transcript, before the answer is sent.
	Save(ctx context.Context, bot, session string) error
	// Forget: the local copy holds a turn that was not stored (the
	// message is handed back); the next Restore replaces it.
	Forget(bot, session string)
}

// Conversations lists the conversations kept, for an admin, and forgets
// a user's, on their word or an admin's.
type Conversations interface {
	// Conversations lists the conversations with a current session that
	// f selects, the most recently used first.
	Conversations(ctx context.Context, f ConversationFilter) ([]Conversation, error)
	// ForgetUser deletes what is kept of user's with bot ("": with every
	// bot): their conversations (message.Key.User is user), with their
	// sessions, past ones too, and stored transcripts, the buttons under
	// them, the updates not answered yet in them and what was scheduled
	// for them anywhere (message.Scheduled); the /voice choice, the daily
	// counts, the notes kept about them (Memories), their reminders and
	// contact (Reminders, Contacts). Buttons
	// elsewhere (a group's) that name the user no longer do: they are the
	// group's admins' (Buttons.User the chat's id, as an anonymous
	// admin's), and a question asked of the user is closed. Usage records
	// stay, with the user's id (and a private chat's id) removed, so costs
	// still add up. It returns what it deleted, for the caller to delete
	// what lives beside the backend (the CLI's own transcripts, generated
	// files) and to end its warm CLIs, and tells the other instances
	// (WatchForgets).
	ForgetUser(ctx context.Context, bot string, user int64) (Forgotten, error)
	// WatchForgets calls fn, until ctx ends, with every ForgetUser done
	// from now on through another instance sharing the backend, so this
	// one too ends its warm CLIs and deletes its copies of what was
	// forgotten. A backend of one process has no other: it returns.
	WatchForgets(ctx context.Context, fn func(Forgotten))
}

// Memories keeps the notes a persona keeps about each user, per bot (a
// brain's memory): the model writes and drops them through brainbot's
// memory tools, the user reads and drops them with /memory, and they go
// with the user's other data when they are forgotten (ForgetUser). They
// are kept until then: no retention prunes them.
type Memories interface {
	// Notes lists user's notes with bot, the oldest first.
	Notes(ctx context.Context, bot string, user int64) ([]Note, error)
	// AddNote keeps text as user's newest note with bot, made at now,
	// unless limit (> 0) notes are kept already (ErrNotesFull). Its ID is
	// one no other note of the user's with bot has had.
	AddNote(ctx context.Context, bot string, user int64, text string, limit int, now time.Time) (Note, error)
	// DropNote deletes user's note id with bot; false if there is none.
	DropNote(ctx context.Context, bot string, user int64, id string) (bool, error)
	// DropNotes deletes every note of user's with bot and says how many.
	DropNotes(ctx context.Context, bot string, user int64) (int, error)
}

// Maintenance drops what the retention no longer keeps.
type Maintenance interface {
	// Prune deletes what r no longer keeps at now. A backend whose
	// records expire by themselves prunes nothing.
	Prune(ctx context.Context, now time.Time, r Retention) (Pruned, error)
}
