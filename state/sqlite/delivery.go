package sqlite

import (
	"context"
	"time"

	"brainbot/message"
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
	c.handBack(again, db.retry.wait(d.handedBack), db.closing)
}

// handedBack is a delivery handed back, due again at due.
type handedBack struct {
	d   *delivery
	due time.Time
}

// handBack queues d for the consumer once wait has passed, and after
// every delivery handed back before it: a conversation's later message,
// handed back after its earlier one (the intake hands a message's
// waiting successors back with it), must not overtake it, though the
// earlier one may wait longer (it was handed back before).
func (c *consumer) handBack(d *delivery, wait time.Duration, closing context.Context) {
	c.mu.Lock()
	c.back = append(c.back, handedBack{d: d, due: time.Now().Add(wait)})
	start := !c.handingBack
	c.handingBack = true
	c.mu.Unlock()
	if start {
		go c.handBackInOrder(closing)
	}
}

// handBackInOrder queues the deliveries handed back, in order, each once
// it is due, until none is left or the consumer or the store stopped.
func (c *consumer) handBackInOrder(closing context.Context) {
	for {
		c.mu.Lock()
		if len(c.back) == 0 || c.ctx.Err() != nil || closing.Err() != nil {
			c.back, c.handingBack = nil, false // left in the journal for the next start
			c.mu.Unlock()
			return
		}
		next := c.back[0] // stays in back until queued: appends of its conversation wait behind it
		c.mu.Unlock()
		t := time.NewTimer(time.Until(next.due))
		select {
		case <-c.ctx.Done():
		case <-closing.Done():
		case <-t.C:
			c.mu.Lock()
			c.back = c.back[1:]
			c.mu.Unlock()
			c.push(next.d)
		}
		t.Stop()
	}
}
