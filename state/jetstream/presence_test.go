package jetstream

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"brainbot/state/jetstream/natstest"
)

// slowExpiry gives heartbeats and leases TTLs far longer than a closed
// connection takes to be found (a quarter of a member TTL): a member taken for
// gone before they expire was found by its connection.
func slowExpiry(cfg *Config) {
	cfg.MemberTTL, cfg.LeaseTTL, cfg.PinnedTTL = 8*time.Second, 30*time.Second, 30*time.Second
}

const goneLine = "member gone: its connection to NATS closed; its partitions and bots go to the others"

// A member whose connection to NATS closes (killed: its process gone, its
// socket closed) is found by that, not by the expiry of its heartbeat and
// leases: the others take its partitions and its bot at once. b's
// connection goes through a gate shut for good, as a SIGKILL closes it.
func TestAKilledMemberIsFoundByItsClosedConnection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	server := natstest.StartServer(t)
	gate := natstest.NewGate(t, server.URL)
	b, _ := joinLogged(t, gate.URL, "b", slowExpiry)
	a, logs := joinLogged(t, server.URL, "a", slowExpiry)
	for _, c := range []*Cluster{a, b} {
		c.Work(ctx, func(d *Delivery) { go d.Done(true) })
	}
	// A bot the spread gives to b: b takes its lease at once, and a
	// waits without asking for it.
	bot := "bot-0"
	for i := 1; spread([]string{"a", "b"}, "a", []string{bot})[0] != "b"; i++ {
		bot = fmt.Sprint("bot-", i)
	}
	polls := func(c *Cluster) bool { return slices.Contains(c.Status().Polled, bot) }
	go b.Lease(ctx, bot, func(ctx context.Context) error { <-ctx.Done(); return nil })
	waitFor(t, hangGuard, "b to poll", func() bool { return polls(b) })
	go a.Lease(ctx, bot, func(ctx context.Context) error { <-ctx.Done(); return nil })
	waitFor(t, hangGuard, "the partitions spread", func() bool { return spreadOver(ctx, []*Cluster{a, b}, 2) })

	gate.Shut()
	killed := time.Now()
	// Within b's lease TTL: taken by the lease's expiry, it is late.
	waitFor(t, 20*time.Second, "a to take b's bot and partitions", func() bool {
		return polls(a) && len(a.Status().Partitions) == 8
	})
	t.Logf("a took b's work %v after b's connection closed", time.Since(killed).Round(time.Millisecond))
	if !logged(logs, goneLine, "b") {
		t.Errorf("a did not log %q for b: it took b's work by the expiry of b's heartbeat", goneLine)
	}
	if !logged(logs, "poller lease of a gone member dropped", "b") {
		t.Errorf("a did not drop b's lease: it took it by its expiry")
	}
}

// Only a member that says it answers on the presence subject is asked: an
// older brainbot's heartbeat, without the mark, is left to its TTL during
// a rolling upgrade, where a marked one that does not answer is expelled.
func TestAMemberWithoutThePresenceMarkIsNotAsked(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := natstest.Start(t)
	a, logs := joinLogged(t, url, "a", slowExpiry)
	a.Work(ctx, func(d *Delivery) { go d.Done(true) })
	beat := time.Now().UTC().Format(time.RFC3339Nano)
	for key, value := range map[string]string{"older": beat, "ghost": beat + presenceMark} {
		if _, err := a.updates.members.kv.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hangGuard, "the ghost expelled", func() bool { return logged(logs, goneLine, "ghost") })
	if _, err := a.updates.members.kv.Get(ctx, "older"); err != nil {
		t.Errorf("the older member's heartbeat: %v, want it kept until its TTL", err)
	}
	if n := logs.FilterMessage(goneLine).Len(); n != 1 {
		t.Errorf("%d members expelled, want the ghost alone:\n%v", n, entries(logs.FilterMessage(goneLine)))
	}
}

func entries(logs *observer.ObservedLogs) []map[string]any {
	var out []map[string]any
	for _, e := range logs.All() {
		out = append(out, e.ContextMap())
	}
	return out
}

// A killed member is expelled once, by the instance that found it first:
// the others see its heartbeat deleted and stop asking for it, and none
// of them deletes it again, unpins its partitions again or says it is gone
// a second time.
func TestAKilledMemberIsExpelledOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	server := natstest.StartServer(t)
	gate := natstest.NewGate(t, server.URL)
	b, _ := joinLogged(t, gate.URL, "b", slowExpiry)
	a, aLogs := joinLogged(t, server.URL, "a", slowExpiry)
	c, cLogs := joinLogged(t, server.URL, "c", slowExpiry)
	for _, x := range []*Cluster{a, b, c} {
		x.Work(ctx, func(d *Delivery) { go d.Done(true) })
	}
	waitFor(t, hangGuard, "the partitions spread", func() bool { return spreadOver(ctx, []*Cluster{a, b, c}, 3) })
	gate.Shut()
	waitFor(t, hangGuard, "a and c to take b's partitions", func() bool {
		return len(a.Status().Partitions)+len(c.Status().Partitions) == 8
	})
	// The other has found b gone by its own asks within one round (an
	// eighth of slowExpiry's member TTL) of the first: two rounds on, a
	// second expulsion would have come.
	time.Sleep(2 * time.Second)
	if n := aLogs.FilterMessage(goneLine).Len() + cLogs.FilterMessage(goneLine).Len(); n != 1 {
		t.Errorf("b expelled %d times, want once:\na: %v\nc: %v", n, entries(aLogs.FilterMessage(goneLine)), entries(cLogs.FilterMessage(goneLine)))
	}
}

// A member whose connection drops and comes straight back (the client
// reconnects at once, as after a NATS node's restart or a reset) is not
// taken for gone: its connection was closed for less than two rounds of
// asks, and it keeps its partitions.
func TestAMemberThatReconnectsAtOnceIsNotTakenForGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	server := natstest.StartServer(t)
	gate := natstest.NewGate(t, server.URL)
	b, bLogs := joinLogged(t, gate.URL, "b", func(*Config) {})
	a, aLogs := joinLogged(t, server.URL, "a", func(*Config) {})
	for _, c := range []*Cluster{a, b} {
		c.Work(ctx, func(d *Delivery) { go d.Done(true) })
	}
	waitFor(t, hangGuard, "the partitions spread", func() bool { return spreadOver(ctx, []*Cluster{a, b}, 2) })
	reconnects := b.updates.conn.nc.Stats().Reconnects
	gate.Shut()
	gate.Open()
	waitFor(t, hangGuard, "b to reconnect", func() bool { return b.updates.conn.nc.Stats().Reconnects > reconnects })
	time.Sleep(2 * a.cfg.MemberTTL) // rounds of asks enough to expel it several times over
	if logged(aLogs, goneLine, "b") || bLogs.FilterMessageSnippet("taken for gone").Len() > 0 {
		t.Fatalf("b, back at once, was taken for gone:\na: %v", entries(aLogs.FilterMessage(goneLine)))
	}
	if !spreadOver(ctx, []*Cluster{a, b}, 2) {
		t.Errorf("b lost its partitions: a %v, b %v", a.Status().Partitions, b.Status().Partitions)
	}
}
