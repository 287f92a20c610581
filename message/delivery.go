package message

import (
	"context"
	"sync/atomic"
	"time"
)

// Delivery is one update a log (the embedded journal, the cluster's
// stream) hands to the intake. It stays the log's until Done or Abandon:
// exactly one of them is called.
type Delivery interface {
	Envelope() Envelope
	// Redelivered: handed out before, by an earlier process or another
	// instance, which may have begun it.
	Redelivered() bool
	// Attempts is how often work on it started before; Charged: an
	// earlier attempt counted it against its sender's daily limit.
	Attempts() int
	Charged() bool
	// MarkCharged records that it was counted against the daily limit,
	// to be answered in mode; MarkAttempt that work on it starts now.
	MarkCharged(ctx context.Context, mode string) error
	MarkAttempt(ctx context.Context, mode string) error
	// Done: answered, or needing no answer; answered marks it so that a
	// redelivery is not answered again. Abandon: hand it back to the log,
	// for a later attempt (shutdown cut it short).
	Done(answered bool)
	Abandon()
}

// Inbound is one message for a bot to answer, as the intake hands it to
// the conversation: the update, and the progress of its deliveries (an
// album's, all of them).
type Inbound struct {
	Update
	// RequestID names its trip through brainbot in the logs.
	RequestID string
	Arrived   time.Time
	// Received is when the update first reached brainbot (the log's
	// Envelope.Received), the same at every delivery: its age, where
	// Arrived is when this delivery reached this process. Zero when
	// unknown.
	Received time.Time
	Progress Progress
	// Superseded: the sender edited the message while it was answered;
	// the edited version is answered instead, and nothing of this answer
	// is sent.
	Superseded atomic.Bool
}

// Progress is what the conversation tells the log of a message as it
// answers it.
type Progress interface {
	// Attempts is how often work on it started before; Charged: it was
	// counted against the daily limit already.
	Attempts() int
	Charged() bool
	MarkCharged(ctx context.Context, mode string) error
	MarkAttempt(ctx context.Context, mode string) error
	// Answered: the reply is out. A crash from here on must not answer
	// it again, so it is done at once.
	Answered()
	// Finish: the conversation is done with it (answered or not); keep:
	// shutdown cut it short, and it is handed back for a later attempt.
	Finish(keep bool)
}
