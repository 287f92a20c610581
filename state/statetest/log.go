package statetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"brainbot/message"
)

// The update log and its deliveries, and the poller leases.

// me is the bot as its poller knows it.
var me = message.Identity{ID: 999001, Username: "alice_bot"}

// poller names the poller of alice's Telegram bot.
const poller = "alice:999001"

// update is the envelope of a text message to k, as a poller makes it
// from what Telegram sent.
func update(k message.Key, id int64) message.Envelope {
	return said(k, id, "Ann", fmt.Sprintf("message %d", id))
}

// said is update with the sender's first name and the text.
func said(k message.Key, id int64, name, text string) message.Envelope {
	chatType, thread := "private", ""
	if k.Chat < 0 {
		chatType = "supergroup"
	}
	if k.Thread > 0 {
		thread = fmt.Sprintf(`"message_thread_id":%d,"is_topic_message":true,`, k.Thread)
	}
	raw := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,%s"date":1764200000,`+
		`"chat":{"id":%d,"type":%q},"from":{"id":42,"is_bot":false,"first_name":%q},"text":%q}}`,
		id, id%1000, thread, k.Chat, chatType, name, text)
	return message.Envelope{Bot: k.Bot, Me: me, UpdateID: id, Key: k, Raw: []byte(raw), Received: base()}
}

func appendAll(t *testing.T, s *subject, envs ...message.Envelope) {
	t.Helper()
	for _, env := range envs {
		must(t, s.Append(ctx(t), poller, env))
	}
}

// consumer takes what a log hands over, as the intake does: handle
// queues, never blocks.
type consumer struct {
	got  chan message.Delivery
	stop context.CancelFunc
}

// startConsume consumes s's log until stop (or the test's end).
func startConsume(t *testing.T, s *subject) *consumer {
	c := &consumer{got: make(chan message.Delivery, 256)}
	var consuming context.Context
	consuming, c.stop = context.WithCancel(context.Background())
	t.Cleanup(c.stop)
	s.Consume(consuming, func(d message.Delivery) {
		select {
		case c.got <- d:
		default:
			panic("statetest: more deliveries than a subtest makes")
		}
	})
	return c
}

// consume consumes s's log for a subtest that needs no deliveries.
func consume(t *testing.T, s *subject) (stop func()) { return startConsume(t, s).stop }

// next is the next delivery handed over.
func (c *consumer) next(t *testing.T) message.Delivery {
	t.Helper()
	select {
	case d := <-c.got:
		return d
	case <-time.After(hangGuard):
		t.Fatalf("no delivery within %v", hangGuard)
		return nil
	}
}

// take returns the next n deliveries.
func (c *consumer) take(t *testing.T, n int) []message.Delivery {
	t.Helper()
	out := make([]message.Delivery, n)
	for i := range out {
		out[i] = c.next(t)
	}
	return out
}

// until takes deliveries until each of the updates stop names came,
// and returns them all, in the order they came.
func (c *consumer) until(t *testing.T, stop ...int64) []message.Delivery {
	t.Helper()
	var out []message.Delivery
	for len(stop) > 0 {
		d := c.next(t)
		out = append(out, d)
		stop = slices.DeleteFunc(stop, func(id int64) bool { return id == d.Envelope().UpdateID })
	}
	return out
}

// byConversation is the ids of ds per conversation, in the order handed.
func byConversation(ds []message.Delivery) map[message.Key][]int64 {
	out := map[message.Key][]int64{}
	for _, d := range ds {
		env := d.Envelope()
		out[env.Key] = append(out[env.Key], env.UpdateID)
	}
	return out
}

// wantEnvelope checks that d hands env over intact: the update's bytes
// as Telegram sent them, its conversation and the bot as its poller knew
// it. Received is the log's: the time it stored the update (to the
// millisecond), the same in every delivery (a request id is made of it).
func wantEnvelope(t *testing.T, d message.Delivery, env message.Envelope) {
	t.Helper()
	got := d.Envelope()
	if got.Bot != env.Bot || got.Me != env.Me || got.UpdateID != env.UpdateID || got.Key != env.Key ||
		string(got.Raw) != string(env.Raw) || got.Received.IsZero() || got.Accepted {
		t.Errorf("delivered envelope = %+v\nwant %+v", got, env)
	}
}

// wantMarks checks what a delivery tells of the work before it.
func wantMarks(t *testing.T, d message.Delivery, redelivered bool, attempts int, charged bool) {
	t.Helper()
	if d.Redelivered() != redelivered || d.Attempts() != attempts || d.Charged() != charged {
		t.Errorf("update %d: Redelivered %v, Attempts %d, Charged %v; want %v, %d, %v", d.Envelope().UpdateID,
			d.Redelivered(), d.Attempts(), d.Charged(), redelivered, attempts, charged)
	}
}

var logTests = []behaviour{
	{"AppendNeverWaitsForTheConsumer", func(t *testing.T, s *subject) {
		// A consumer still busy with a delivery (the intake's callback
		// holds no lock of the log's) must not hold Append up: the log
		// hands over from its own goroutine, never from inside Append.
		release, handed := make(chan struct{}), make(chan message.Delivery, 1)
		consuming, stop := context.WithCancel(context.Background())
		t.Cleanup(stop)
		s.Consume(consuming, func(d message.Delivery) { <-release; handed <- d })
		appended := make(chan error, 1)
		go func() { appended <- s.Append(ctx(t), poller, update(chat, 1)) }()
		select {
		case err := <-appended:
			must(t, err)
		case <-time.After(hangGuard):
			t.Fatalf("Append did not return within %v while the consumer's handle waited", hangGuard)
		}
		close(release)
		select {
		case d := <-handed:
			d.Done(true)
		case <-time.After(hangGuard):
			t.Fatalf("no delivery within %v", hangGuard)
		}
	}},
	{"AppendThenConsumeInOrderPerConversation", func(t *testing.T, s *subject) {
		c := startConsume(t, s)
		envs := []message.Envelope{update(chat, 1), update(topic, 2), update(chat, 3), update(guest, 4), update(topic, 5),
			update(chat, 6)}
		appendAll(t, s, envs...)
		got := c.take(t, len(envs))
		want := map[message.Key][]int64{chat: {1, 3, 6}, topic: {2, 5}, guest: {4}}
		if order := byConversation(got); fmt.Sprint(order) != fmt.Sprint(want) {
			t.Errorf("handed per conversation %v, want %v", order, want)
		}
		for _, d := range got {
			wantEnvelope(t, d, envs[d.Envelope().UpdateID-1])
			wantMarks(t, d, false, 0, false)
			d.Done(true)
		}
	}},
	{"StoredBeforeConsumeIsHanded", func(t *testing.T, s *subject) {
		// Redelivered is not asserted: an embedded log cannot tell what it
		// stored in this process before the consumer came from what an
		// earlier one left, and a stream can.
		envs := []message.Envelope{update(topic, 11), update(topic, 12)}
		appendAll(t, s, envs...)
		c := startConsume(t, s)
		got := c.take(t, 2)
		for i, d := range got {
			wantEnvelope(t, d, envs[i])
			d.Done(true)
		}
	}},
	{"OffsetIsTheLastStoredNeverBack", func(t *testing.T, s *subject) {
		wantOffset(t, s, poller, 0)
		appendAll(t, s, update(chat, 20), update(topic, 22))
		wantOffset(t, s, poller, 22)
		appendAll(t, s, update(chat, 21)) // a webhook's posts may come out of order
		wantOffset(t, s, poller, 22)
		wantOffset(t, s, "alice:555", 0)
		s.restarted()
		wantOffset(t, s, poller, 22)
	}},
	{"RestartHandsBackWhatWasNotDone", func(t *testing.T, s *subject) {
		c := startConsume(t, s)
		envs := map[int64]message.Envelope{}
		for _, env := range []message.Envelope{update(chat, 31), update(chat, 32), update(chat, 33), update(topic, 34),
			update(topic, 35), update(guest, 36)} {
			envs[env.UpdateID] = env
			appendAll(t, s, env)
		}
		first := map[int64]message.Delivery{}
		for _, d := range c.take(t, len(envs)) {
			first[d.Envelope().UpdateID] = d
		}
		first[31].Done(true)
		first[34].Done(false) // needed no answer
		must(t, first[32].MarkCharged(ctx(t), "text"))
		must(t, first[32].MarkAttempt(ctx(t), "text"))
		must(t, first[35].MarkAttempt(ctx(t), "voice"))
		// SIGTERM: the consumer stops, the work cut short is handed back.
		c.stop()
		for _, id := range []int64{32, 33, 35, 36} {
			first[id].Abandon()
		}
		s.restarted()
		c = startConsume(t, s)
		appendAll(t, s, update(chat, 37), update(topic, 38), update(guest, 39))
		got := c.until(t, 37, 38, 39)
		want := map[message.Key][]int64{chat: {32, 33, 37}, topic: {35, 38}, guest: {36, 39}}
		if order := byConversation(got); fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("handed after the restart, per conversation: %v, want %v", order, want)
		}
		for _, d := range got {
			id := d.Envelope().UpdateID
			d.Done(true)
			if id > 36 {
				continue
			}
			wantEnvelope(t, d, envs[id])
			if got, want := d.Envelope().Received.UnixMilli(), first[id].Envelope().Received.UnixMilli(); got != want {
				t.Errorf("update %d redelivered as received at %d ms, first at %d", id, got, want)
			}
			switch id {
			case 32:
				wantMarks(t, d, true, 1, true)
			case 35:
				// An attempt is made in a mode: counted or not, it is
				// charged.
				wantMarks(t, d, true, 1, true)
			default:
				wantMarks(t, d, true, 0, false)
			}
		}
	}},
	{"AbandonHandsBack", func(t *testing.T, s *subject) {
		c := startConsume(t, s)
		env := update(guest, 41)
		appendAll(t, s, env)
		d := c.next(t)
		must(t, d.MarkCharged(ctx(t), "text"))
		must(t, d.MarkAttempt(ctx(t), "text"))
		d.Abandon() // the state was unavailable for now
		again := c.next(t)
		wantEnvelope(t, again, env)
		wantMarks(t, again, true, 1, true)
		if again.Envelope().Received.UnixMilli() != d.Envelope().Received.UnixMilli() {
			t.Errorf("handed back as received at %v, first at %v", again.Envelope().Received, d.Envelope().Received)
		}
		again.Done(true)
		appendAll(t, s, update(guest, 42))
		if next := c.next(t); next.Envelope().UpdateID != 42 {
			t.Errorf("after Done, update %d was handed again", next.Envelope().UpdateID)
		}
	}},
}

func wantOffset(t *testing.T, s *subject, poller string, want int64) {
	t.Helper()
	got, err := s.Offset(ctx(t), poller)
	must(t, err)
	if got != want {
		t.Errorf("Offset(%s) = %d, want %d", poller, got, want)
	}
}

var errPollFailed = errors.New("statetest: Telegram refused the token")

var leaseTests = []behaviour{
	{"PollRunsUntilCtxEnds", func(t *testing.T, s *subject) {
		leasing, stop := context.WithCancel(context.Background())
		defer stop()
		var running []chan struct{}
		var results []chan error
		for _, bot := range []string{"alice", "bob"} {
			started, result := make(chan struct{}), make(chan error, 1)
			running, results = append(running, started), append(results, result)
			go func() {
				result <- s.Lease(leasing, bot, func(ctx context.Context) error {
					close(started)
					<-ctx.Done()
					return nil // as Telegram's poller returns when its context ends
				})
			}()
		}
		for _, started := range running {
			wait(t, started, "poll to run")
		}
		stop()
		for _, result := range results {
			if err := waitResult(t, result); err != nil {
				t.Errorf("Lease after its context ended = %v, want nil", err)
			}
		}
	}},
	{"PollErrorIsReturned", func(t *testing.T, s *subject) {
		err := s.Lease(ctx(t), "alice", func(context.Context) error { return errPollFailed })
		if !errors.Is(err, errPollFailed) {
			t.Errorf("Lease = %v, want poll's error", err)
		}
	}},
	{"HeldAgainAfterRestart", func(t *testing.T, s *subject) {
		leasing, stop := context.WithCancel(context.Background())
		started, result := make(chan struct{}), make(chan error, 1)
		go func() {
			result <- s.Lease(leasing, "alice", func(ctx context.Context) error { close(started); <-ctx.Done(); return nil })
		}()
		wait(t, started, "poll to run")
		stop()
		must(t, waitResult(t, result))
		s.restarted()
		if err := s.Lease(ctx(t), "alice", func(context.Context) error { return errPollFailed }); !errors.Is(err, errPollFailed) {
			t.Errorf("Lease after a restart = %v, want poll run (its error)", err)
		}
	}},
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("no %s within %v", what, hangGuard)
	}
}

func waitResult(t *testing.T, result <-chan error) error {
	t.Helper()
	select {
	case err := <-result:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("Lease did not return within %v", hangGuard)
		return nil
	}
}
