// Package intake takes in the bots' updates from their log, whichever runs
// (the embedded journal or the cluster's stream: both hand it
// message.Delivery values), and hands each message to the conversation.
// For every delivery it reads the update, drops what is not for the bot,
// answers a /stop and taps on buttons beside the queue rather than behind
// it, admits a message into its conversation's queue (a handful per
// burst), gathers an album
// into one message, and keeps one queue per conversation, drained by one
// goroutine in order. A message whose work already started twice gets
// "please send it again" instead of a third try, in both modes.
//
// Handing over never blocks the log: a delivery for a bot that is not
// connected (yet) waits beside the queues, in order, without holding up
// any other bot's, and is routed once the bot connects. A panic while an
// update is taken in or routed is contained to that update.
package intake

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/message"
	"brainbot/metrics"
)

// Handler answers the messages the intake hands on (the conversation).
type Handler interface {
	// Serve answers a message from its conversation's queue: one at a
	// time per conversation, in order.
	Serve(ctx context.Context, m *message.Inbound)
	// The rest answer a message outside its queue. Busy: the queue is
	// full; tell says whether to tell the sender (the first of a burst)
	// or only to record it, in which case it must not block. Stop: /stop
	// or a draft's stop button (message.StopPressed), for the turn the
	// queue is busy with. Unreadable: the update could
	// not be read. Resend: work on it started twice already.
	Busy(ctx context.Context, m *message.Inbound, tell bool)
	Stop(ctx context.Context, m *message.Inbound)
	Unreadable(ctx context.Context, m *message.Inbound)
	Resend(ctx context.Context, m *message.Inbound)
	// Tap answers a tap on one of the bot's buttons. A tap that chose an
	// option of a question returns it as words (the tap's update, with
	// the option as its text and the sender it answers for): the intake
	// queues them as the user's next message.
	Tap(ctx context.Context, m *message.Inbound) (words message.Update, chosen bool)
}

// Config is what an intake needs.
type Config struct {
	// QueueSize caps the messages waiting in one conversation besides the
	// one being answered.
	QueueSize int
	// Groups is a bot's groups setting now (brain.Groups*; "" when it has
	// no brain).
	Groups func(bot string) string
	// Decode reads an update (telegram.Decode).
	Decode  func(message.Envelope) message.Update
	Handler Handler
	// Work counts the intake's goroutines and Ctx is what they hand
	// messages on under: the owner's shutdown waits for Work within its
	// grace, then cancels Ctx. Stopping is closed when no new message may
	// start.
	Work     *sync.WaitGroup
	Ctx      context.Context
	Stopping <-chan struct{}
	Metrics  *metrics.Metrics
	Log      *zap.Logger
}

// Intake is the bots' one intake.
type Intake struct {
	cfg    Config
	albums *albums

	mu     sync.Mutex
	queues map[message.Key]*queue
	// ready are the bots connected now, as Telegram knows them.
	ready map[string]message.Identity
	// parked are the deliveries of bots not connected, in order;
	// draining: a goroutine routes a bot's parked deliveries now.
	parked   map[string][]message.Delivery
	draining map[string]bool
	// last is when each bot's latest update handed over here came in.
	last map[string]time.Time
}

// New makes an intake.
func New(cfg Config) *Intake {
	in := &Intake{cfg: cfg, queues: map[message.Key]*queue{}, ready: map[string]message.Identity{},
		parked: map[string][]message.Delivery{}, draining: map[string]bool{}, last: map[string]time.Time{}}
	in.albums = newAlbums(in.enqueue, cfg.Work)
	return in
}

// Deliver takes a delivery from a log: the log's callback. It never
// blocks on anything but the intake's own bookkeeping: it reads the
// update, routes it and queues it, or, for a bot not connected, keeps it
// aside until the bot is.
func (in *Intake) Deliver(d message.Delivery) {
	if isClosed(in.cfg.Stopping) {
		d.Abandon()
		return
	}
	env := d.Envelope()
	bot := env.Bot
	in.mu.Lock()
	if env.Received.After(in.last[bot]) {
		in.last[bot] = env.Received
	}
	me, ready := in.ready[bot]
	if !ready || in.draining[bot] || len(in.parked[bot]) > 0 {
		if len(in.parked[bot]) == 0 {
			in.cfg.Log.Info("updates wait for their bot to connect", zap.String("bot", bot))
		}
		in.parked[bot] = append(in.parked[bot], d)
		in.mu.Unlock()
		return
	}
	in.mu.Unlock()
	in.route(d, me)
}

// Ready says bot is connected, as me: its deliveries kept aside meanwhile
// are routed, in order, in a goroutine of their own.
func (in *Intake) Ready(bot string, me message.Identity) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ready[bot] = me
	if in.draining[bot] || len(in.parked[bot]) == 0 {
		return
	}
	in.draining[bot] = true
	in.cfg.Work.Add(1)
	go func() {
		defer in.cfg.Work.Done()
		in.unpark(bot)
	}()
}

// unpark routes bot's parked deliveries until none is left or the bot is
// gone again.
func (in *Intake) unpark(bot string) {
	for {
		in.mu.Lock()
		me, ready := in.ready[bot]
		if !ready || len(in.parked[bot]) == 0 || isClosed(in.cfg.Stopping) {
			in.draining[bot] = false
			in.mu.Unlock()
			return
		}
		d := in.parked[bot][0]
		in.parked[bot] = in.parked[bot][1:]
		in.mu.Unlock()
		in.route(d, me)
	}
}

// Gone says bot's client stopped (its token changed, its brain was
// removed): its deliveries wait until it is Ready again.
func (in *Intake) Gone(bot string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.ready, bot)
}

// Stop hands every delivery still kept aside back to its log. Call it
// once Stopping is closed.
func (in *Intake) Stop() {
	in.mu.Lock()
	parked := in.parked
	in.parked = map[string][]message.Delivery{}
	in.mu.Unlock()
	for _, ds := range parked {
		for _, d := range ds {
			d.Abandon()
		}
	}
}

// aside runs fn in a goroutine of its own, counted with the intake's
// work: an answer that does not wait in its queue.
func (in *Intake) aside(fn func(ctx context.Context)) {
	in.cfg.Work.Add(1)
	go func() {
		defer in.cfg.Work.Done()
		fn(in.cfg.Ctx)
	}()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
