// Package journal is the intake's log when brainbot runs alone: every
// update polled or posted to a webhook is kept in the SQLite store as
// Telegram sent it, with the poller's offset in the same transaction,
// until it is answered, and handed to the intake. What an earlier process
// left unanswered is handed first at the next start, with the marks its
// work left (charged, attempts); entries of releases that kept the
// message rather than the update are read by building the update they
// stand for.
package journal

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/message"
	"brainbot/bot/store"
)

// Store is the SQL the journal runs on (*store.Store).
type Store interface {
	Journal(ctx context.Context, e store.Entry, poller string, updateID int64) (int64, error)
	Charged(ctx context.Context, id int64, mode string) error
	Attempt(ctx context.Context, id int64, mode string) error
	Done(ctx context.Context, id int64) error
	Pending(ctx context.Context) ([]store.Entry, error)
	Offset(ctx context.Context, poller string) (int64, error)
}

// Options are a journal's collaborators.
type Options struct {
	// Launch runs fn as work of its owner, whose shutdown waits for it
	// within a grace period and then cancels its context: the clearing of
	// an entry the store refused for a while is retried there.
	Launch func(fn func(ctx context.Context))
	// RetryMin and RetryMax bound the waits between those retries.
	RetryMin, RetryMax time.Duration
	Log                *zap.Logger
}

// Journal is the embedded log: a message.Delivery per entry.
type Journal struct {
	store Store
	opts  Options

	// mu orders appends and their hand-over, so the consumer gets entries
	// in the order they were stored.
	mu     sync.Mutex
	handle func(message.Delivery)
	// consuming ends when the consumer stops taking deliveries.
	consuming context.Context
}

// New makes the journal over s.
func New(s Store, o Options) *Journal {
	return &Journal{store: s, opts: o}
}

// Append stores env, and poller's offset with it (in one transaction), and
// hands it to the consumer.
func (j *Journal) Append(ctx context.Context, poller string, env message.Envelope) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	id, err := j.store.Journal(ctx, store.Entry{Bot: env.Bot, Chat: env.Key.Chat, Thread: env.Key.Thread, Update: env.Raw,
		UpdateID: env.UpdateID, MeID: env.Me.ID, MeUsername: env.Me.Username, Created: env.Received}, poller, env.UpdateID)
	if err != nil {
		return err
	}
	if j.handle != nil {
		j.handle(&delivery{j: j, id: id, env: env})
	}
	return nil
}

// Offset is the last update id poller stored (0 if none).
func (j *Journal) Offset(ctx context.Context, poller string) (int64, error) {
	return j.store.Offset(ctx, poller)
}

// Consume hands handle what an earlier process left unanswered, in the
// order it came, then every entry appended from now on, as it is stored.
// handle must not block.
func (j *Journal) Consume(ctx context.Context, handle func(message.Delivery)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	entries, err := j.store.Pending(ctx)
	if err != nil {
		j.opts.Log.Error("could not read the journal; unanswered messages are not replayed", zap.Error(err))
	}
	for _, e := range entries {
		handle(j.left(e))
	}
	j.handle, j.consuming = handle, ctx
}

// left is the delivery of an entry an earlier process left.
func (j *Journal) left(e store.Entry) *delivery {
	d := &delivery{j: j, id: e.ID, redelivered: true, attempts: e.Attempts, charged: e.Mode != "",
		env: message.Envelope{Bot: e.Bot, Me: message.Identity{ID: e.MeID, Username: e.MeUsername}, UpdateID: e.UpdateID,
			Key: message.Key{Bot: e.Bot, Chat: e.Chat, Thread: e.Thread}, Raw: e.Update, Received: e.Created}}
	if e.Update == nil {
		var err error
		if d.env.Raw, err = legacyUpdate(e); err != nil {
			j.opts.Log.Warn("journaled message's files are unreadable; answering its text alone", zap.String("bot", e.Bot),
				zap.Int64("journal_id", e.ID), zap.Error(err))
		}
		d.env.Accepted = true
	}
	return d
}

// delivery is one journal entry handed to the consumer.
type delivery struct {
	j           *Journal
	id          int64
	env         message.Envelope
	redelivered bool
	attempts    int
	charged     bool
	// handedBack counts the Abandons while running: each waits longer.
	handedBack int
	// attempted: MarkAttempt journaled an attempt, which a hand-back
	// counts.
	attempted bool
}

func (d *delivery) Envelope() message.Envelope { return d.env }
func (d *delivery) Redelivered() bool          { return d.redelivered }
func (d *delivery) Attempts() int              { return d.attempts }
func (d *delivery) Charged() bool              { return d.charged }

func (d *delivery) MarkCharged(ctx context.Context, mode string) error {
	err := d.j.store.Charged(ctx, d.id, mode)
	if err == nil {
		d.charged = true // a hand-back is not counted again
	}
	return err
}

func (d *delivery) MarkAttempt(ctx context.Context, mode string) error {
	err := d.j.store.Attempt(ctx, d.id, mode)
	d.attempted = err == nil
	return err
}

// Done clears the entry; answered or not, it is not handed out again.
func (d *delivery) Done(bool) { d.j.clear(d.id, d.env.Bot) }

// Abandon leaves the entry where it is: the journal is its claim. While
// the consumer runs (the message met a store unavailable for now), it is
// handed out again after a backoff, growing with each hand-back; once the
// consumer stopped, the next start hands it out.
func (d *delivery) Abandon() {
	j := d.j
	j.mu.Lock()
	ctx, handle := j.consuming, j.handle
	j.mu.Unlock()
	if ctx == nil || ctx.Err() != nil {
		return
	}
	wait := min(j.opts.RetryMin<<min(d.handedBack, 16), j.opts.RetryMax)
	attempts := d.attempts
	if d.attempted {
		attempts++ // as the journal has it: the next attempt is a retry
	}
	again := &delivery{j: j, id: d.id, env: d.env, redelivered: true, attempts: attempts, charged: d.charged,
		handedBack: d.handedBack + 1}
	go func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			j.mu.Lock()
			defer j.mu.Unlock()
			handle(again)
		}
	}()
}
