package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"brainbot/message"
	"brainbot/state/jetstream/natstest"
)

// join connects an instance with short timings, closed at the end.
func join(t *testing.T, url, name string) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, testConfig(url, name, zaptest.NewLogger(t).Named(name)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConfig is the cluster's configuration in tests: short TTLs.
func testConfig(url, name string, log *zap.Logger) Config {
	return Config{URL: url, Instance: name, Partitions: 8, LeaseTTL: 1500 * time.Millisecond,
		MemberTTL: 1500 * time.Millisecond, PinnedTTL: 1500 * time.Millisecond, AckWait: 2 * time.Second, Log: log}
}

// hangGuard bounds a wait only a hang reaches: what the test waits for
// comes sooner even on a loaded machine, and the wait ends when it does.
const hangGuard = time.Minute

// waitFor waits until ok holds, failing the test after within. Where
// within is not hangGuard, the bound is what the test checks.
func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLeaseOnePollerAndTakeover(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a"), join(t, url, "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var polling atomic.Int32
	var who sync.Map
	poll := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			if n := polling.Add(1); n > 1 {
				t.Errorf("%d pollers at once", n)
			}
			who.Store("now", name)
			<-ctx.Done()
			polling.Add(-1)
			return nil
		}
	}
	go a.Lease(ctx, "bot-1", poll("a"))
	waitFor(t, hangGuard, "a to poll", func() bool { v, _ := who.Load("now"); return v == "a" })
	go b.Lease(ctx, "bot-1", poll("b"))
	time.Sleep(3 * time.Second) // several TTLs: a refreshes, b must not take it
	if v, _ := who.Load("now"); v != "a" {
		t.Fatalf("poller = %v, want a to keep the lease", v)
	}
	if got := a.Status().Polled; len(got) != 1 || got[0] != "bot-1" {
		t.Errorf("a polls %v", got)
	}
	if !a.Status().Connected {
		t.Error("a does not say it is connected to NATS")
	}
	// a dies: its connection goes, its lease expires, b takes over.
	died := time.Now()
	a.nc.Close()
	if a.Status().Connected {
		t.Error("a says it is connected to NATS after its connection closed")
	}
	waitFor(t, hangGuard, "b to take over", func() bool { v, _ := who.Load("now"); return v == "b" })
	t.Logf("takeover after %v", time.Since(died))
}

// publish publishes raw, update id of bot's chat, as its poller would.
func publish(ctx context.Context, c *Cluster, chat, id int64, raw []byte) error {
	return c.Publish(ctx, message.Envelope{Bot: "bot", UpdateID: id, Key: message.Key{Bot: "bot", Chat: chat}, Raw: raw})
}

// partitionOf waits until one partition has an update pending and
// returns it.
func partitionOf(t *testing.T, c *Cluster) int {
	t.Helper()
	part := -1
	waitFor(t, hangGuard, "the update to be pending on its partition", func() bool {
		for p := range 8 {
			cons, err := c.stream.Consumer(context.Background(), consumerName(p))
			if err != nil {
				continue
			}
			if info, err := cons.Info(context.Background()); err == nil && info.NumPending > 0 {
				part = p
			}
		}
		return part >= 0
	})
	return part
}

// update is a Telegram update as far as the tests need.
func update(id int64, chat int64, text string) []byte {
	b, _ := json.Marshal(map[string]any{"update_id": id, "message": map[string]any{"chat": map[string]any{"id": chat}, "text": text}})
	return b
}

type got struct {
	mu   sync.Mutex
	by   map[string][]int64 // instance → update ids, in order handed on
	chat map[int64][]int64  // chat → update ids, in order answered
	all  map[int64]int
}

func newGot() *got {
	return &got{by: map[string][]int64{}, chat: map[int64][]int64{}, all: map[int64]int{}}
}

func (g *got) record(name string, d *Delivery) {
	var u struct {
		Message struct{ Chat struct{ ID int64 } }
	}
	_ = json.Unmarshal(d.Envelope().Raw, &u)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.by[name] = append(g.by[name], d.Envelope().UpdateID)
	g.chat[u.Message.Chat.ID] = append(g.chat[u.Message.Chat.ID], d.Envelope().UpdateID)
	g.all[d.Envelope().UpdateID]++
}

func (g *got) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.all)
}

func TestPartitionsSpreadMoveAndKeepOrder(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a"), join(t, url, "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newGot()
	// a answers at once; b holds its updates without answering until it
	// dies, so they must be redelivered to a.
	var bHolding atomic.Bool
	bHolding.Store(true)
	a.Work(ctx, func(d *Delivery) { g.record("a", d); go d.Done(true) })
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	b.Work(bctx, func(d *Delivery) {
		if bHolding.Load() {
			return
		}
		g.record("b", d)
		go d.Done(true)
	})
	waitFor(t, hangGuard, "both to own partitions", func() bool {
		return len(a.Status().Partitions) > 0 && len(b.Status().Partitions) > 0 &&
			len(a.Status().Partitions)+len(b.Status().Partitions) == 8
	})
	const chats, per = 20, 5
	id := int64(0)
	pub := func(round int) {
		for chat := int64(1); chat <= chats; chat++ {
			id++
			if err := publish(ctx, a, chat, id, update(id, chat, fmt.Sprint(round))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r := range per {
		pub(r)
	}
	// The same update again is dropped by its message id.
	if err := publish(ctx, b, 1, 1, update(1, 1, "again")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hangGuard, "a's share", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.by["a"]) > 0 })
	time.Sleep(500 * time.Millisecond)
	// b dies holding its share: nothing acknowledged, connection gone.
	bcancel()
	b.nc.Close()
	died := time.Now()
	waitFor(t, hangGuard, "every update answered", func() bool { return g.count() == chats*per })
	t.Logf("all answered %v after b died", time.Since(died))
	waitFor(t, hangGuard, "a to own every partition", func() bool { return len(a.Status().Partitions) == 8 })
	// More after the handover.
	pub(per)
	waitFor(t, hangGuard, "the last round", func() bool { return g.count() == chats*(per+1) })
	g.mu.Lock()
	defer g.mu.Unlock()
	for u, n := range g.all {
		if n != 1 {
			t.Errorf("update %d answered %d times", u, n)
		}
	}
	for chat, ids := range g.chat {
		for i := 1; i < len(ids); i++ {
			if ids[i] < ids[i-1] {
				t.Errorf("chat %d answered out of order: %v", chat, ids)
				break
			}
		}
	}
	if len(g.by["b"]) != 0 {
		t.Errorf("b answered %v", g.by["b"])
	}
}

func TestRedeliveredAnsweredUpdateIsNotHandedOn(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a"), join(t, url, "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handed atomic.Int32
	got := make(chan *Delivery, 1)
	a.Work(ctx, func(d *Delivery) { got <- d })
	if err := publish(ctx, a, 7, 42, update(42, 7, "hi")); err != nil {
		t.Fatal(err)
	}
	d := <-got
	// Answered, but the acknowledgement never reaches the server: the
	// marker is written, then a dies.
	if _, err := a.marks.answered.Put(ctx, markKey(d.Envelope()), []byte("a")); err != nil {
		t.Fatal(err)
	}
	_ = d
	a.nc.Close()
	b.Work(ctx, func(*Delivery) { handed.Add(1) })
	cons, err := b.stream.Consumer(ctx, consumerName(0))
	if err != nil {
		t.Fatal(err)
	}
	_ = cons
	waitFor(t, hangGuard, "the redelivery to be acknowledged", func() bool {
		for p := range 8 {
			c, err := b.stream.Consumer(ctx, consumerName(p))
			if err != nil {
				return false
			}
			info, err := c.Info(ctx)
			if err != nil || info.NumAckPending > 0 || info.NumPending > 0 {
				return false
			}
		}
		return true
	})
	if n := handed.Load(); n != 0 {
		t.Fatalf("answered update handed on %d times", n)
	}
}

// What the work on an update recorded (charged, attempts) comes with its
// redelivery, as a journal replay's marks do; so does the update as its
// poller stored it, the bot's identity included.
func TestProgressComesWithTheRedelivery(t *testing.T) {
	url := natstest.Start(t)
	a := join(t, url, "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *Delivery, 2)
	a.Work(ctx, func(d *Delivery) { got <- d })
	env := message.Envelope{Bot: "bot", UpdateID: 42, Key: message.Key{Bot: "bot", Chat: -100, Thread: 3}, Raw: update(42, -100, "hi"),
		Me: message.Identity{ID: 1001, Username: "bot_bot"}}
	if err := a.Append(ctx, "bot@1001", env); err != nil {
		t.Fatal(err)
	}
	first := <-got
	if e := first.Envelope(); e.Key != env.Key || e.Me != env.Me || e.UpdateID != 42 || string(e.Raw) != string(env.Raw) ||
		first.Redelivered() || first.Attempts() != 0 || first.Charged() {
		t.Fatalf("first delivery %+v", first)
	}
	if off, err := a.Offset(ctx, "bot@1001"); off != 42 || err != nil {
		t.Errorf("offset %d, %v", off, err)
	}
	if err := first.MarkCharged(ctx, "text"); err != nil {
		t.Fatal(err)
	}
	if err := first.MarkAttempt(ctx, "text"); err != nil {
		t.Fatal(err)
	}
	first.Abandon()
	again := <-got
	if !again.Redelivered() || again.Attempts() != 1 || !again.Charged() {
		t.Fatalf("redelivery: redelivered %v, attempts %d, charged %v", again.Redelivered(), again.Attempts(), again.Charged())
	}
	again.Done(true)
}
