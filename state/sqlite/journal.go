// Package journal is the intake's log when brainbot runs alone: every
// update polled or posted to a webhook is kept in the SQLite store as
// Telegram sent it, with the poller's offset in the same transaction,
// until it is answered, and handed to the intake. What an earlier process
// left unanswered is handed first at the next start, with the marks its
// work left (charged, attempts); entries of releases that kept the
// message rather than the update are read by building the update they
// stand for.
package sqlite

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/message"
)

// Journal is the embedded log: a message.Delivery per entry.
type Journal struct {
	store *Store
	// retryMin and retryMax bound the waits between the retries of a
	// clear, and before a delivery handed back is handed out again.
	retryMin, retryMax time.Duration
	log                *zap.Logger

	// mu orders appends and their hand-over, so the consumer gets entries
	// in the order they were stored.
	mu     sync.Mutex
	handle func(message.Delivery)
	// consuming ends when the consumer stops taking deliveries.
	consuming context.Context
}

// newJournal makes the journal over s.
func newJournal(s *Store, o options) *Journal {
	return &Journal{store: s, retryMin: o.retryMin, retryMax: o.retryMax, log: o.log}
}

// Append stores env, and poller's offset with it (in one transaction), and
// hands it to the consumer.
func (j *Journal) Append(ctx context.Context, poller string, env message.Envelope) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	id, err := j.store.Journal(ctx, Entry{Bot: env.Bot, Chat: env.Key.Chat, Thread: env.Key.Thread, Update: env.Raw,
		UpdateID: env.UpdateID, MeID: env.Me.ID, MeUsername: env.Me.Username, Created: env.Received}, poller, env.UpdateID)
	if err != nil {
		return err
	}
	if j.handle != nil {
		j.handle(&delivery{j: j, id: id, env: env})
	}
	return nil
}

// Consume hands handle what an earlier process left unanswered, in the
// order it came, then every entry appended from now on, as it is stored.
// handle must not block.
func (j *Journal) Consume(ctx context.Context, handle func(message.Delivery)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	entries, err := j.store.Pending(ctx)
	if err != nil {
		j.log.Error("could not read the journal; unanswered messages are not replayed", zap.Error(err))
	}
	for _, e := range entries {
		handle(j.left(e))
	}
	j.handle, j.consuming = handle, ctx
}

// left is the delivery of an entry an earlier process left.
func (j *Journal) left(e Entry) *delivery {
	d := &delivery{j: j, id: e.ID, redelivered: true, attempts: e.Attempts, charged: e.Mode != "",
		env: message.Envelope{Bot: e.Bot, Me: message.Identity{ID: e.MeID, Username: e.MeUsername}, UpdateID: e.UpdateID,
			Key: message.Key{Bot: e.Bot, Chat: e.Chat, Thread: e.Thread}, Raw: e.Update, Received: e.Created}}
	if e.Update == nil {
		var err error
		if d.env.Raw, err = legacyUpdate(e); err != nil {
			j.log.Warn("journaled message's files are unreadable; answering its text alone", zap.String("bot", e.Bot),
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
	wait := min(j.retryMin<<min(d.handedBack, 16), j.retryMax)
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
