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

// tapHandler serves messages one at a time, holding the first until
// release is closed, and answers taps: "choose" chooses "Rome".
type tapHandler struct {
	busyHandler
	release chan struct{}
	served  chan *message.Inbound
	tapped  chan *message.Inbound
}

func (h *tapHandler) Serve(_ context.Context, m *message.Inbound) {
	h.served <- m
	<-h.release
}

func (h *tapHandler) Tap(_ context.Context, m *message.Inbound) (message.Update, bool) {
	h.tapped <- m
	words := m.Update
	words.Text = "Rome"
	return words, m.Tap.Data == "choose"
}

// A tap is answered beside the queue, while its conversation's queue is
// busy; the option it chose waits its turn there, as the user's words,
// with the tap's delivery; a tap that chose nothing is done at once.
func TestTapsBesideTheQueue(t *testing.T) {
	h := &tapHandler{release: make(chan struct{}), served: make(chan *message.Inbound, 4), tapped: make(chan *message.Inbound, 4)}
	key := message.Key{Bot: "b", Chat: 7}
	updates := map[string]message.Update{
		"typed":  {Kind: message.Written, Key: key, Sender: 7, Text: "hello"},
		"choose": {Kind: message.Tapped, Key: key, Sender: 7, Tap: message.Tap{QueryID: "q1", Data: "choose"}},
		"other":  {Kind: message.Tapped, Key: key, Sender: 7, Tap: message.Tap{QueryID: "q2", Data: "other"}},
	}
	var work sync.WaitGroup
	in := New(Config{QueueSize: 5, Handler: h, Work: &work, Ctx: context.Background(), Stopping: make(chan struct{}),
		Decode: func(env message.Envelope) message.Update { return updates[string(env.Raw)] }, Metrics: metrics.New(), Log: zap.NewNop()})
	in.Ready("b", message.Identity{ID: 1, Username: "b_bot"})
	deliver := func(raw string) *recorded {
		d := &recorded{env: message.Envelope{Bot: "b", Raw: []byte(raw)}}
		in.Deliver(d)
		return d
	}
	deliver("typed")
	first := <-h.served
	chosen, other := deliver("choose"), deliver("other")
	for range 2 {
		select {
		case <-h.tapped:
		case <-time.After(10 * time.Second):
			t.Fatal("a tap waited behind the busy queue")
		}
	}
	close(h.release)
	second := <-h.served
	work.Wait()
	if first.Text != "hello" || second.Text != "Rome" || second.Tap.QueryID != "q1" {
		t.Errorf("served %q, then %q (%+v)", first.Text, second.Text, second.Tap)
	}
	if !other.done || other.abandoned {
		t.Errorf("a tap that chose nothing: done %v, abandoned %v", other.done, other.abandoned)
	}
	// The chosen option's delivery is the queued message's: done when
	// that is answered.
	if chosen.done || chosen.abandoned {
		t.Errorf("the chosen option's delivery finished before its answer: done %v, abandoned %v", chosen.done, chosen.abandoned)
	}
	second.Progress.Finish(false)
	if !chosen.done {
		t.Error("the chosen option's delivery is not the queued message's")
	}
	select {
	case m := <-h.served:
		t.Errorf("served %q too", m.Text)
	default:
	}
}
