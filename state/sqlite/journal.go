package sqlite

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/message"
)

// Deliveries hands the journal's entries over to its consumer, the intake:
// first what an earlier process left unanswered, with the marks its work
// left (charged, attempts), then every update appended, each as a
// message.Delivery, in the order they were stored. Entries of releases
// that kept the message rather than the update are read by building the
// update they stand for.
type Deliveries struct {
	entries *Entries

	// mu orders appends and the start of the consumer: each entry is
	// queued for the consumer in the order it was stored, and none is
	// both left for Consume to read and queued, or neither.
	mu       sync.Mutex
	consumer *consumer // nil until Consume
}

// Append stores env, and poller's offset with it (in one transaction), and
// queues it for the consumer: it never waits for the consumer's handle. A
// scheduled message (env.Scheduled, no poller) stored already is neither
// stored nor queued again (Journal).
func (l *Deliveries) Append(ctx context.Context, poller string, env message.Envelope) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := Entry{Bot: env.Bot, Chat: env.Key.Chat, Thread: env.Key.Thread, Update: env.Raw,
		UpdateID: env.UpdateID, MeID: env.Me.ID, MeUsername: env.Me.Username, Created: env.Received, Scheduled: env.Scheduled}
	if env.Scheduled != nil {
		e.User = env.Scheduled.User // a forget of the user finds it
	}
	id, err := l.entries.Journal(ctx, e, poller, env.UpdateID)
	if err != nil {
		return err
	}
	if c := l.consumer; c != nil && id != 0 { // 0: kept already
		c.pushNew(&delivery{entries: l.entries, consumer: c, id: id, env: env})
	}
	return nil
}

// Consume hands handle what an earlier process left unanswered, in the
// order it came, then every entry appended from now on, in the order it
// was stored, until ctx ends or the store is closed. handle is called
// from a goroutine of the store's, one delivery at a time, and must not
// block. A store has one consumer.
func (l *Deliveries) Consume(ctx context.Context, handle func(message.Delivery)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &consumer{ctx: ctx, handle: handle, wake: make(chan struct{}, 1)}
	entries, err := l.entries.Pending(ctx)
	if err != nil {
		l.entries.db.log.Error("could not read the journal; unanswered messages are not replayed", zap.Error(err))
	}
	for _, e := range entries {
		c.push(l.left(c, e))
	}
	l.consumer = c
	l.entries.db.launch(c.run)
}

// left is the delivery of an entry an earlier process left.
func (l *Deliveries) left(c *consumer, e Entry) *delivery {
	d := &delivery{entries: l.entries, consumer: c, id: e.ID, redelivered: true, attempts: e.Attempts, charged: e.Mode != "",
		env: message.Envelope{Bot: e.Bot, Me: message.Identity{ID: e.MeID, Username: e.MeUsername}, UpdateID: e.UpdateID,
			Key: message.Key{Bot: e.Bot, Chat: e.Chat, Thread: e.Thread}, Raw: e.Update, Received: e.Created, Scheduled: e.Scheduled}}
	if e.Update == nil && e.Scheduled == nil {
		var err error
		if d.env.Raw, err = legacyUpdate(e); err != nil {
			l.entries.db.log.Warn("journaled message's files are unreadable; answering its text alone", zap.String("bot", e.Bot),
				zap.Int64("journal_id", e.ID), zap.Error(err))
		}
		d.env.Accepted = true
	}
	return d
}

// consumer is one Consume's: the deliveries queued for its handle, in
// order, and the goroutine that hands them over, so that no one who
// queues one waits for handle, nor calls it inside a lock of their own.
type consumer struct {
	ctx    context.Context
	handle func(message.Delivery)
	// wake tells run that something was queued.
	wake chan struct{}

	mu    sync.Mutex
	queue []*delivery
	// back are the deliveries handed back, in the order they were, until
	// they are due again; handingBack: a goroutine queues them.
	back        []handedBack
	handingBack bool
}

// push queues d for handle, unless the consumer stopped: the entry then
// stays in the journal for the next start.
func (c *consumer) push(d *delivery) {
	c.mu.Lock()
	if c.ctx.Err() == nil {
		c.queue = append(c.queue, d)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // run is woken already
	}
}

// pushNew queues an appended delivery, behind the deliveries of its
// conversation handed back and not due yet: it is answered after them.
func (c *consumer) pushNew(d *delivery) {
	c.mu.Lock()
	behind := slices.ContainsFunc(c.back, func(b handedBack) bool { return b.d.env.Key == d.env.Key })
	if behind {
		c.back = append(c.back, handedBack{d: d, due: time.Now()})
	}
	c.mu.Unlock()
	if !behind {
		c.push(d)
	}
}

// run hands the queued deliveries over, one at a time, until the consumer
// stops or closing ends (the store is closed).
func (c *consumer) run(closing context.Context) {
	defer c.drop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-closing.Done():
			return
		case <-c.wake:
		}
		for d := c.next(closing); d != nil; d = c.next(closing) {
			c.handle(d)
		}
	}
}

// next takes the first delivery queued; nil when none is, or when the
// consumer or the store stopped.
func (c *consumer) next(closing context.Context) *delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 || c.ctx.Err() != nil || closing.Err() != nil {
		return nil
	}
	d := c.queue[0]
	c.queue[0], c.queue = nil, c.queue[1:]
	return d
}

// drop forgets what is still queued once the consumer stopped: it stays
// in the journal for the next start.
func (c *consumer) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = nil
}
