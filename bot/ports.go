package bot

import (
	"context"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/message"
)

// Chats is the pipeline's way to Telegram, as a given bot (the
// transport, through the Manager).
type Chats interface {
	// Outbox sends to conversation to as its bot; in a group its first
	// message replies to message replyTo.
	Outbox(to message.Key, group bool, replyTo int, log *zap.Logger) Outbox
	// Fetch downloads a file bot received, of at most limit bytes
	// (message.ErrTooBig beyond).
	Fetch(ctx context.Context, bot, fileID string, limit int64) ([]byte, error)
}

// Outbox sends to one chat; one goroutine uses it. Errors of a user who
// blocked the bot are message.ErrBlocked.
type Outbox interface {
	// Text sends text, split to Telegram's limit; formatted: Claude's
	// Markdown shown as such.
	Text(ctx context.Context, text string, formatted bool) error
	File(ctx context.Context, kind message.FileKind, path string) error
	// KeepAction shows action in the chat until stop is called.
	KeepAction(ctx context.Context, action message.Action) (stop func())
	// Stream shows a reply while it is written; the next Text replaces
	// what it showed.
	Stream(ctx context.Context) Stream
	// Sent are the ids of the messages sent, in order.
	Sent() []int
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
}
