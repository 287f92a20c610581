package conversation

import (
	"context"
	"io"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/state"
	"brainbot/toolspec"
)

// The pipeline's ports: each what it needs of a room it does not know.

// Agent runs one request through the model; *claude.Driver implements it.
// On error the result may still be non-nil with what the CLI got as far as
// (a speech request's turn-1 text).
type Agent interface {
	Run(ctx context.Context, req claude.Request) (*claude.Result, error)
	// Interrupt stops the turn a conversation's request is running (the
	// request then fails with claude.ErrInterrupted); false when none
	// runs. End ends a conversation's warm CLI process.
	Interrupt(conversation string) bool
	End(conversation string)
	// SessionFile is where the CLI keeps the transcript of bot's session
	// on this machine (/forget deletes it).
	SessionFile(bot, session string) string
}

// Warmer is the Agent's warming (*claude.Driver): Claude processes
// started ahead of a conversation's next message and of new ones.
//
// PrewarmResume starts a resumed conversation's process ahead of its next
// message, within the agent's budget (claude.ErrNoRoom when full);
// HasProcess tells whether a conversation has its process already,
// running or idle: such a conversation is left alone, its transcript too
// (restoring it could end a CLI answering right now). Expect is told when
// a conversation's message starts waiting for a Claude slot: a process
// started ahead for it below real work is raised then, so that it
// finishes starting while the message waits. KeepSpares keeps n
// processes of shape under the name set, started ahead of requests that
// let it name their session (replaced when the brain the shape comes
// from is edited), DropSpares ends them. ReadySpares is how many spares
// of bot's own conversations' shape are ready now: that many of its new
// conversations waiting for a slot skip a CLI's start.
type Warmer interface {
	PrewarmResume(req claude.Request) error
	HasProcess(conversation string) bool
	Expect(conversation string)
	KeepSpares(set string, shape claude.Request, n int) error
	DropSpares(set string)
	ReadySpares(bot string) int
}

// State is what conversations keep between messages (package state: its
// backend is the process's, SQLite or JetStream).
type State interface {
	state.Sessions
	state.Voices
	state.Counters
	state.Spending
	state.ButtonSets
	state.Transcripts
	state.Conversations
	state.Memories
	state.Reminders
	state.Contacts
}

// Chats is the pipeline's way to Telegram, as a given bot (the
// transport, through the Manager).
type Chats interface {
	// Outbox sends to conversation to as its bot; in a group its first
	// message replies to message replyTo.
	Outbox(to message.Key, group bool, replyTo int, log *zap.Logger) Outbox
	// GuestOutbox answers guest query queryID of bot: once, in text.
	GuestOutbox(bot, queryID string, log *zap.Logger) Outbox
	// Fetch downloads a file bot received, of at most limit bytes
	// (message.ErrTooBig beyond).
	Fetch(ctx context.Context, bot, fileID string, limit int64) ([]byte, error)
	// AnswerTap answers a tap's query as bot, with a notice ("" for none)
	// shown only to the user who tapped.
	AnswerTap(ctx context.Context, bot, query, notice string) error
	// IsAdmin reports whether user is an administrator (or the creator)
	// of group chat, as Telegram says now.
	IsAdmin(ctx context.Context, bot string, chat, user int64) (bool, error)
}

// Outbox sends to one chat; one goroutine uses it. Errors of a user who
// blocked the bot are message.ErrBlocked.
type Outbox interface {
	// Text sends text, split to Telegram's limit; formatted: Claude's
	// Markdown shown as such.
	Text(ctx context.Context, text string, formatted bool) error
	// Notice sends text meant for user only: in a group only they see it
	// (where Telegram allows; else an ordinary reply).
	Notice(ctx context.Context, text string, user int64) error
	// Rich sends Claude's Markdown as one rich message when it should
	// (always, or when it needs one); false: not sent, send it as Text.
	Rich(ctx context.Context, text string, always bool) (bool, error)
	File(ctx context.Context, kind message.FileKind, path string) error
	// KeepAction shows action in the chat until stop is called.
	KeepAction(ctx context.Context, action message.Action) (stop func())
	// Stream shows a reply while it is written; the next Text replaces
	// what it showed, or Withdraw deletes it (no reply follows).
	Stream(ctx context.Context) Stream
	Withdraw(ctx context.Context) error
	// Sent are the ids of the messages sent, in order.
	Sent() []int
	// Attach puts buttons under the next Text's last message, or the
	// next File; Quote makes the next message a reply to message id.
	Attach(kb message.Keyboard)
	Quote(id int)
	// Amend adds a paragraph to message id, which was sent as text's last
	// part, and takes its buttons away; DropButtons only takes them away.
	Amend(ctx context.Context, id int, text, addition string) error
	DropButtons(ctx context.Context, id int) error
}

// Speaker speaks text with a brain's speech settings (*mcp.Speaker): an
// answer read aloud.
type Speaker interface {
	// Speak returns text spoken, and spoken, the characters OpenAI spoke
	// (what it bills; after an error too).
	Speak(ctx context.Context, text string, settings toolspec.SpeechSettings) (data []byte, ext string, spoken int, err error)
}

// Stream is a reply shown while the model writes it.
type Stream interface {
	// Update is the reply so far; it never blocks.
	Update(text string)
	// Finish stops the stream and says when its first text showed (zero:
	// never).
	Finish() time.Time
	// Cancel stops it without waiting (for a panic that skips Finish).
	Cancel()
	// DraftID names the drafts it shows, whose stop button reports it (0:
	// no drafts, no button).
	DraftID() int64
	// UseRich lets its drafts be rich, as Outbox.Rich would send the
	// text; before the first Update.
	UseRich(always bool)
}

// Transcriber turns speech into text; *transcribe.Client implements it.
// name is the audio's file name, whose extension tells its format.
type Transcriber interface {
	Transcribe(ctx context.Context, model, name string, audio io.Reader) (string, error)
}

// Panels runs /panel (bot/panel/host).
type Panels interface {
	// Start answers /panel, m, sent to a bot whose brain is b; a run goes
	// on in the background. It returns the message's outcome and the
	// reply to send ("" for none), or, with an error, the phase that
	// failed as the outcome.
	Start(ctx context.Context, m *message.Inbound, b *brain.Brain, log *zap.Logger) (outcome, reply string, err error)
	// OnPanel reports whether bot is a member of a valid panel now.
	OnPanel(bot string) bool
}
