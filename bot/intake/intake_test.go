package intake

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"brainbot/message"
	"brainbot/metrics"
)

// busyHandler records the busy answers; every other answer is a bug here.
type busyHandler struct {
	mu   sync.Mutex
	busy []bool
}

func (h *busyHandler) Serve(context.Context, *message.Inbound)      { panic("served") }
func (h *busyHandler) Stop(context.Context, *message.Inbound)       { panic("stopped") }
func (h *busyHandler) Unreadable(context.Context, *message.Inbound) { panic("unreadable") }
func (h *busyHandler) Resend(context.Context, *message.Inbound)     { panic("resent") }
func (h *busyHandler) Tap(context.Context, *message.Inbound) (message.Update, bool) {
	panic("tapped")
}
func (h *busyHandler) Busy(_ context.Context, _ *message.Inbound, tell bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.busy = append(h.busy, tell)
}

// A message beyond a full queue is turned away: the first of a burst is
// told (in the background), the rest only recorded, and none is queued.
func TestFullQueueTurnsAway(t *testing.T) {
	h := &busyHandler{}
	var work sync.WaitGroup
	in := New(Config{QueueSize: 5, Handler: h, Work: &work, Ctx: context.Background(), Stopping: make(chan struct{}),
		Metrics: metrics.New(), Log: zap.NewNop()})
	key := message.Key{Bot: "gone", Chat: 7}
	in.queues[key] = &queue{accepted: in.cfg.QueueSize + 1}
	for range 2 {
		m := &message.Inbound{Update: message.Update{Key: key, Sender: 7, Text: "hi"}, RequestID: "req", Arrived: time.Now()}
		if in.admit(m) {
			t.Fatal("admitted into a full queue")
		}
	}
	work.Wait()
	told := 0
	for _, tell := range h.busy {
		if tell {
			told++
		}
	}
	if len(h.busy) != 2 || told != 1 {
		t.Errorf("busy answers %v, want one told and one not", h.busy)
	}
	if q := in.queues[key]; len(q.waiting) != 0 {
		t.Errorf("%d messages queued", len(q.waiting))
	}
}

// recorded is a delivery that records how it was finished.
type recorded struct {
	env       message.Envelope
	abandoned bool
	done      bool
}

func (d *recorded) Envelope() message.Envelope                { return d.env }
func (d *recorded) Redelivered() bool                         { return false }
func (d *recorded) Attempts() int                             { return 0 }
func (d *recorded) Charged() bool                             { return false }
func (d *recorded) MarkCharged(context.Context, string) error { return nil }
func (d *recorded) MarkAttempt(context.Context, string) error { return nil }
func (d *recorded) Done(bool)                                 { d.done = true }
func (d *recorded) Abandon()                                  { d.abandoned = true }

// A delivery for a bot that never connects waits beside the queues; at
// the stop it goes back to its log, neither lost nor done.
func TestWaitingDeliveriesGoBackAtTheStop(t *testing.T) {
	var work sync.WaitGroup
	stopping := make(chan struct{})
	in := New(Config{QueueSize: 5, Handler: &busyHandler{}, Work: &work, Ctx: context.Background(), Stopping: stopping,
		Metrics: metrics.New(), Log: zap.NewNop()})
	waiting := &recorded{env: message.Envelope{Bot: "beta", Raw: []byte(`{"update_id":1}`)}}
	in.Deliver(waiting)
	close(stopping)
	in.Stop()
	late := &recorded{env: message.Envelope{Bot: "beta"}}
	in.Deliver(late)
	work.Wait()
	if !waiting.abandoned || waiting.done || !late.abandoned {
		t.Errorf("waiting: abandoned %v, done %v; late: abandoned %v", waiting.abandoned, waiting.done, late.abandoned)
	}
}

// A bot's backlog counts its own conversations' queues and its updates
// kept aside, and says when its latest update came in.
func TestBacklog(t *testing.T) {
	var work sync.WaitGroup
	stopping := make(chan struct{})
	in := New(Config{QueueSize: 5, Handler: &busyHandler{}, Work: &work, Ctx: context.Background(), Stopping: stopping,
		Metrics: metrics.New(), Log: zap.NewNop()})
	defer func() { close(stopping); in.Stop(); work.Wait() }()
	received := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	in.Deliver(&recorded{env: message.Envelope{Bot: "beta", Raw: []byte(`{"update_id":1}`), Received: received}})
	in.Deliver(&recorded{env: message.Envelope{Bot: "beta", Raw: []byte(`{"update_id":2}`), Received: received.Add(-time.Minute)}})
	msg := &message.Inbound{}
	in.queues[message.Key{Bot: "beta", Chat: 1}] = &queue{running: msg, waiting: []*message.Inbound{msg, msg}}
	in.queues[message.Key{Bot: "beta", Chat: 2}] = &queue{waiting: []*message.Inbound{msg}}
	in.queues[message.Key{Bot: "gamma", Chat: 1}] = &queue{running: msg, waiting: []*message.Inbound{msg}}
	want := Backlog{Waiting: 3, Answering: 1, Parked: 2, LastUpdate: received}
	if got := in.Backlog("beta"); got != want {
		t.Errorf("Backlog(beta) = %+v, want %+v", got, want)
	}
	in.mu.Lock()
	clear(in.queues) // never drained: no goroutine of theirs
	in.mu.Unlock()
}

// A message carries when its update first reached brainbot (the log's
// Envelope.Received), the same at every delivery: a message redelivered
// from an instance that died is as old as it was there, and the Claude
// slots serve the oldest first.
func TestInboundKeepsWhenTheUpdateFirstCame(t *testing.T) {
	h := &tapHandler{release: make(chan struct{}), served: make(chan *message.Inbound, 1)}
	close(h.release)
	var work sync.WaitGroup
	key := message.Key{Bot: "b", Chat: 7}
	in := New(Config{QueueSize: 5, Handler: h, Work: &work, Ctx: context.Background(), Stopping: make(chan struct{}),
		Decode: func(message.Envelope) message.Update {
			return message.Update{Kind: message.Written, Key: key, Sender: 7, Text: "hello"}
		}, Metrics: metrics.New(), Log: zap.NewNop()})
	in.Ready("b", message.Identity{ID: 1, Username: "b_bot"})
	received := time.Now().Add(-20 * time.Second)
	in.Deliver(&recorded{env: message.Envelope{Bot: "b", Raw: []byte(`{"update_id":1}`), Received: received}})
	m := <-h.served
	work.Wait()
	if !m.Received.Equal(received) || !m.Arrived.After(received) {
		t.Errorf("received %v, arrived %v; want received %v and arrived now", m.Received, m.Arrived, received)
	}
	m.Progress.Finish(false)
}

// A reminder brainbot appended is served as a message of the user's
// private chat that carries it, with no bytes of Telegram's to decode.
func TestScheduledIsServed(t *testing.T) {
	h := &tapHandler{release: make(chan struct{}), served: make(chan *message.Inbound, 1)}
	close(h.release)
	var work sync.WaitGroup
	key := message.Key{Bot: "b", Chat: 7}
	in := New(Config{QueueSize: 5, Handler: h, Work: &work, Ctx: context.Background(), Stopping: make(chan struct{}),
		Decode: func(message.Envelope) message.Update { panic("decoded") }, Metrics: metrics.New(), Log: zap.NewNop()})
	in.Ready("b", message.Identity{ID: 1, Username: "b_bot"})
	s := &message.Scheduled{Kind: message.Reminder, ID: "reminder/3", User: 7, Text: "call mom", Due: time.Now()}
	in.Deliver(&recorded{env: message.Envelope{Bot: "b", Key: key, Received: s.Due, Scheduled: s}})
	m := <-h.served
	work.Wait()
	if m.Key != key || m.Sender != 7 || !m.Private() || m.Scheduled != s || m.Text != "" || m.RequestID == "" {
		t.Errorf("served %+v", m.Update)
	}
	m.Progress.Finish(false)
}
