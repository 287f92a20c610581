package intake

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"brainbot/bot/message"
	"brainbot/bot/telegram"
	"brainbot/metrics"
	"brainbot/state/jetstream"
	"brainbot/state/jetstream/natstest"
)

// pausingHandler answers every message but hands the first attempt of
// one back, as the conversation does when NATS does not answer in time
// ("paused": its deliveries go back to the log, to be answered once it
// is back), once the next message of its conversation waits behind it.
type pausingHandler struct {
	busyHandler
	in    *Intake
	pause string

	mu       sync.Mutex
	paused   bool
	answered []string
}

func (h *pausingHandler) Serve(ctx context.Context, m *message.Inbound) {
	h.mu.Lock()
	pause := m.Text == h.pause && !h.paused
	h.paused = h.paused || pause
	h.mu.Unlock()
	if err := m.Progress.MarkAttempt(ctx, "text"); err != nil {
		m.Progress.Finish(true)
		return
	}
	if pause {
		for !h.waitingBehind(m.Key) {
			time.Sleep(5 * time.Millisecond)
		}
		m.Progress.Finish(true)
		return
	}
	h.mu.Lock()
	h.answered = append(h.answered, m.Text)
	h.mu.Unlock()
	m.Progress.Answered()
}

func (h *pausingHandler) waitingBehind(k message.Key) bool {
	h.in.mu.Lock()
	defer h.in.mu.Unlock()
	q := h.in.queues[k]
	return q != nil && len(q.waiting) > 0
}

func (h *pausingHandler) answers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.answered...)
}

// A message handed back while the next one of its conversation waits
// behind it is still answered first: answered second, its turn would be
// missing from the session the next one is answered in (the next one
// answered as if it had never been sent), and its own answer would come
// after. Through a real NATS stream, the updates as Telegram sends them.
func TestAHandedBackMessageKeepsItsPlaceInItsConversation(t *testing.T) {
	url := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := jetstream.Connect(ctx, jetstream.Config{URL: url, Instance: "a", Partitions: 2, AckWait: 2 * time.Second,
		Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := &pausingHandler{pause: "second"}
	var work sync.WaitGroup
	stopping := make(chan struct{})
	in := New(Config{QueueSize: 5, Handler: h, Work: &work, Ctx: ctx, Stopping: stopping, Decode: telegram.Decode,
		Metrics: metrics.New(), Log: zaptest.NewLogger(t)})
	h.in = in
	in.Ready("bot", message.Identity{ID: 99, Username: "the_bot"})
	consuming, stopConsuming := context.WithCancel(ctx)
	c.Consume(consuming, in.Deliver)
	defer func() {
		stopConsuming()
		close(stopping)
		in.Stop()
		work.Wait()
		c.Release()
	}()
	for i, text := range []string{"first", "second", "third"} {
		id := int64(501 + i)
		raw := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":7,"is_bot":false,"first_name":"Ann"},`+
			`"chat":{"id":7,"first_name":"Ann","type":"private"},"date":1764230000,"text":%q}}`, id, 40+i, text)
		env := message.Envelope{Bot: "bot", UpdateID: id, Key: message.Key{Bot: "bot", Chat: 7}, Raw: []byte(raw)}
		if err := c.Publish(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for len(h.answers()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := h.answers(); fmt.Sprint(got) != "[first second third]" {
		t.Errorf("answered %q, want first, second, third: in the order they were sent", got)
	}
}
