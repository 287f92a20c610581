package intake

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"brainbot/bot/telegram"
	"brainbot/message"
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

// waitingBehind reports whether a message of conversation k waits behind
// the one it answers: queued, or in an album still arriving.
func (h *pausingHandler) waitingBehind(k message.Key) bool {
	if h.in.albums.gathering(k.Bot) > 0 {
		return true
	}
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
	h, publish := pausedConversation(t, "second")
	for i, text := range []string{"first", "second", "third"} {
		publish(fmt.Sprintf(`"text":%q`, text), 40+i)
	}
	if got := h.waitAnswers(t, 3); fmt.Sprint(got) != "[first second third]" {
		t.Errorf("answered %q, want first, second, third: in the order they were sent", got)
	}
}

// The same when what waits behind it is an album still arriving (its
// photos are gathered for a second after the last): the album goes back
// with the message, after it. Left, it was queued ahead of the message
// when that came back, as an open album is ahead of any message that
// comes after it.
func TestAHandedBackMessageKeepsItsPlaceBeforeAnAlbum(t *testing.T) {
	h, publish := pausedConversation(t, "second")
	publish(`"text":"first"`, 40)
	publish(`"text":"second"`, 41)
	publish(`"media_group_id":"13919228427634192","caption":"trip","photo":[{"file_id":"p1","file_unique_id":"u1","width":10,"height":10,"file_size":100}]`, 42)
	publish(`"media_group_id":"13919228427634192","photo":[{"file_id":"p2","file_unique_id":"u2","width":10,"height":10,"file_size":100}]`, 43)
	if got := h.waitAnswers(t, 3); fmt.Sprint(got) != "[first second trip]" {
		t.Errorf("answered %q, want first, second, then the album (trip): in the order they were sent", got)
	}
}

// pausedConversation runs an intake on a real NATS stream whose handler
// hands the first attempt of the message pause back (pausingHandler);
// publish sends a message of user 7's private chat with the bot, with
// its fields as Telegram sends them.
func pausedConversation(t *testing.T, pause string) (h *pausingHandler, publish func(fields string, messageID int)) {
	url := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := jetstream.Connect(ctx, jetstream.Config{URL: url, Instance: "a", Partitions: 2, AckWait: 2 * time.Second,
		Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h = &pausingHandler{pause: pause}
	var work sync.WaitGroup
	stopping := make(chan struct{})
	in := New(Config{QueueSize: 5, Handler: h, Work: &work, Ctx: ctx, Stopping: stopping, Decode: telegram.Decode,
		Metrics: metrics.New(), Log: zaptest.NewLogger(t)})
	h.in = in
	in.Ready("bot", message.Identity{ID: 99, Username: "the_bot"})
	consuming, stopConsuming := context.WithCancel(ctx)
	c.Consume(consuming, in.Deliver)
	t.Cleanup(func() {
		stopConsuming()
		close(stopping)
		in.Stop()
		work.Wait()
		c.Release()
		c.Close()
		cancel()
	})
	publish = func(fields string, messageID int) {
		id := int64(500 + messageID)
		raw := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":7,"is_bot":false,"first_name":"Ann"},`+
			`"chat":{"id":7,"first_name":"Ann","type":"private"},"date":1764230000,%s}}`, id, messageID, fields)
		env := message.Envelope{Bot: "bot", UpdateID: id, Key: message.Key{Bot: "bot", Chat: 7}, Raw: []byte(raw)}
		if err := c.Publish(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	return h, publish
}

// waitAnswers waits, up to a minute, for n answers, and returns those
// there are then.
func (h *pausingHandler) waitAnswers(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(h.answers()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return h.answers()
}
