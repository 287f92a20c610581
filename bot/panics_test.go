package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/message"
	"brainbot/metrics"
	"brainbot/state/sqlite"
)

// panicLog is the error line a contained panic leaves.
const panicLog = "panic while handling an update; skipped"

const unreadableBrain = "messages:\n  unreadable: Couldn't read that.\n"

// panicOnJournal is a store whose Journal panics on a message carrying
// #explode: a bug in the intake, as the malformed entity's was.
type panicOnJournal struct{ *sqlite.Store }

func (s panicOnJournal) Append(ctx context.Context, poller string, env message.Envelope) error {
	if strings.Contains(string(env.Raw), "#explode") {
		panic("journal exploded")
	}
	return s.Store.Append(ctx, poller, env)
}

// A panic while the polling handler takes an update in is contained: the
// update is confirmed and skipped, its sender told it could not be read
// (in a group, when it mentions the bot), the admin gets an error line
// with the update id and the stack and a metric, and every other message
// is answered, after a restart too.
func TestPanicInIntakeIsContained(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, unreadableBrain)}, func(c *Config) {
		c.State = panicOnJournal{c.State.(*sqlite.Store)}
		c.Metrics = reg
	})
	private := h.srv.SendText(tokenA, 7, 7, "#explode")
	group := h.srv.SendMessage(tokenA, groupMessage(8, "#explode too", true))
	h.srv.SendText(tokenA, 7, 7, "probe")
	wantSent(t, h, "-1001500:Couldn't read that.", "7:Couldn't read that.", "7:You said: probe")
	for _, id := range []int64{private, group} {
		checkPanicLine(t, h.logs, id, "intake", "panicOnJournal.Append")
	}
	if n := testutil.ToFloat64(reg.Panics.WithLabelValues("alpha", "intake")); n != 2 {
		t.Errorf("brainbot_panics_total{stage=intake} = %v, want 2", n)
	}
	if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
		t.Fatalf("updates left unconfirmed: %v", err)
	}
	h.restartAnswersNothingTwice()
}

// A panic while a message is answered is contained in its worker: the
// sender is told it could not be read, its Claude slot is given back
// (only one here), its journal entry is cleared, so a restart does not
// meet it again, and the next message is answered.
func TestPanicWhileAnsweringIsContained(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, unreadableBrain)}, func(c *Config) {
		c.MaxClaude = 1
		c.Metrics = reg
	})
	id := h.srv.SendText(tokenA, 7, 7, "#panic")
	h.srv.SendText(tokenA, 8, 8, "next")
	wantSent(t, h, "7:Couldn't read that.", "8:You said: next")
	line := checkPanicLine(t, h.logs, id, "answer", "fakeClaude).Run")
	if line["request_id"] == nil {
		t.Errorf("panic line %v without the request id", line)
	}
	if n := testutil.ToFloat64(reg.Panics.WithLabelValues("alpha", "answer")); n != 1 {
		t.Errorf("brainbot_panics_total{stage=answer} = %v, want 1", n)
	}
	// Counted as the request ends, after its answer.
	waitFor(t, func() bool {
		return testutil.ToFloat64(reg.Requests.WithLabelValues("alpha", "text", "unreadable")) == 1
	})
	waitEmptyJournal(t, h.store)
	h.restartAnswersNothingTwice()
}

// In a cluster, a panic while taking in an update another instance
// polled is contained the same way; the update is acknowledged.
func TestPanicInClusterDeliveryIsContained(t *testing.T) {
	reg := metrics.New()
	cl := &fakeCluster{work: make(chan func(message.Delivery), 1)}
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, unreadableBrain)}, func(c *Config) {
		cl.Store = c.State.(*sqlite.Store)
		c.State = cl
		c.Metrics = reg
	})
	handle := <-cl.work
	h.waitLog("telegram bot connected") // updates for a bot not loaded yet are dropped
	update := func(id, user int64, text string) []byte {
		return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"date":1763888000,"chat":{"id":%d,"type":"private","first_name":"Ann"},"from":{"id":%d,"is_bot":false,"first_name":"Ann"},"text":%q}}`,
			id, id, user, user, text)
	}
	bad := &fakeDelivery{bot: "alpha", id: 501, update: update(501, 7, "hello"), explode: true, done: make(chan bool, 2)}
	good := &fakeDelivery{bot: "alpha", id: 502, update: update(502, 8, "fine"), done: make(chan bool, 2)}
	handle(bad)
	handle(good)
	wantSent(t, h, "7:Couldn't read that.", "8:You said: fine")
	if answered := <-bad.done; answered {
		t.Error("the update that panicked was acknowledged as answered")
	}
	if answered := <-good.done; !answered {
		t.Error("the answered update was acknowledged as not answered")
	}
	checkPanicLine(t, h.logs, 501, "delivery", "fakeDelivery).Redelivered")
	if n := testutil.ToFloat64(reg.Panics.WithLabelValues("alpha", "delivery")); n != 1 {
		t.Errorf("brainbot_panics_total{stage=delivery} = %v, want 1", n)
	}
}

// wantSent waits for as many messages as want lists ("chat:text") and
// compares them, in any order (each chat's come in order, not the chats'
// with each other).
func wantSent(t *testing.T, h *harness, want ...string) {
	t.Helper()
	var got []string
	for _, c := range h.waitSent(tokenA, len(want)) {
		got = append(got, fmt.Sprintf("%d:%s", c.ChatID(), c.Param("text")))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("sent %q, want %q", got, want)
	}
}

// checkPanicLine finds the panic line of update id and checks it: error
// level, the stage, the bot, and a stack through where it panicked.
func checkPanicLine(t *testing.T, logs *observer.ObservedLogs, id int64, stage, where string) map[string]any {
	t.Helper()
	for _, e := range logs.FilterMessage(panicLog).All() {
		f := e.ContextMap()
		if f["update_id"] != id {
			continue
		}
		stack, _ := f["stack"].(string)
		if e.Level.String() != "error" || f["stage"] != stage || f["bot"] != "alpha" || f["panic"] == nil || !strings.Contains(stack, where) {
			t.Errorf("panic line of update %d = %v %v, want error, stage %s, a stack through %s", id, e.Level, f, stage, where)
		}
		return f
	}
	t.Errorf("no panic line for update %d", id)
	return nil
}

// fakeCluster hands the test the Manager's delivery handler; this
// instance never polls.
type fakeCluster struct {
	*sqlite.Store
	work chan func(message.Delivery)
}

func (c *fakeCluster) Lease(ctx context.Context, _ string, _ func(context.Context) error) error {
	<-ctx.Done()
	return nil
}

func (c *fakeCluster) Append(context.Context, string, message.Envelope) error {
	return errors.New("this instance does not poll")
}

func (c *fakeCluster) Offset(context.Context, string) (int64, error) { return 0, nil }

func (c *fakeCluster) Consume(_ context.Context, handle func(message.Delivery)) { c.work <- handle }

// fakeDelivery is an update handed to this instance; explode makes it
// panic when asked whether it was delivered before, which intake does.
type fakeDelivery struct {
	bot     string
	id      int64
	update  []byte
	explode bool
	done    chan bool // what Done was told
}

func (d *fakeDelivery) Envelope() message.Envelope {
	return message.Envelope{Bot: d.bot, UpdateID: d.id, Raw: d.update}
}
func (d *fakeDelivery) Redelivered() bool {
	if d.explode {
		panic("delivery exploded")
	}
	return false
}
func (d *fakeDelivery) Attempts() int                             { return 0 }
func (d *fakeDelivery) Charged() bool                             { return false }
func (d *fakeDelivery) MarkCharged(context.Context, string) error { return nil }
func (d *fakeDelivery) MarkAttempt(context.Context, string) error { return nil }
func (d *fakeDelivery) Done(answered bool)                        { d.done <- answered }
func (d *fakeDelivery) Abandon()                                  {} // only at shutdown, after the test's updates
