package sqlite

import (
	"context"
	"time"

	"brainbot/bot/message"
)

// delivery is one journal entry handed to the consumer. Its marks are
// written to the entries it is one of.
type delivery struct {
	entries     *Entries
	consumer    *consumer
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
	err := d.entries.Charged(ctx, d.id, mode)
	if err == nil {
		d.charged = true // a hand-back is not counted again
	}
	return err
}

func (d *delivery) MarkAttempt(ctx context.Context, mode string) error {
	err := d.entries.Attempt(ctx, d.id, mode)
	d.attempted = err == nil
	return err
}

// Done clears the entry; answered or not, it is not handed out again.
func (d *delivery) Done(bool) { d.entries.clear(d.id, d.env.Bot) }

// Abandon leaves the entry where it is: the journal is its claim. While
// the consumer runs (the message met a store unavailable for now), it is
// queued for the consumer again after a backoff, growing with each
// hand-back; once the consumer stopped, the next start hands it out.
func (d *delivery) Abandon() {
	c, db := d.consumer, d.entries.db
	if c.ctx.Err() != nil {
		return
	}
	attempts := d.attempts
	if d.attempted {
		attempts++ // as the journal has it: the next attempt is a retry
	}
	again := &delivery{entries: d.entries, consumer: c, id: d.id, env: d.env, redelivered: true, attempts: attempts,
		charged: d.charged, handedBack: d.handedBack + 1}
	wait := db.retry.wait(d.handedBack)
	go func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-c.ctx.Done():
		case <-db.closing.Done():
		case <-t.C:
			c.push(again)
		}
	}()
}
