package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/message"
	"brainbot/state/jetstream/natstest"
)

// The poller leases spread over the instances: with three instances and
// seven bots, each polls at most its share (three), also when the first
// one polled every bot before the others started. Never two poll a bot at
// once.
func TestLeasesSpreadOverTheInstances(t *testing.T) {
	url := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	polling := map[string]string{} // bot: instance
	const bots = 7
	start := func(name string) *Cluster {
		c := join(t, url, name)
		c.Work(ctx, func(d *Delivery) { go d.Done(true) })
		for i := range bots {
			bot := fmt.Sprint("bot-", i)
			go c.Lease(ctx, bot, func(ctx context.Context) error {
				mu.Lock()
				if other, ok := polling[bot]; ok {
					t.Errorf("%s polls %s while %s does", name, bot, other)
				}
				polling[bot] = name
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				delete(polling, bot)
				mu.Unlock()
				return nil
			})
		}
		return c
	}
	a := start("a")
	waitFor(t, hangGuard, "a to poll every bot", func() bool { return len(a.Status().Polled) == bots })
	cs := []*Cluster{a, start("b"), start("c")}
	spread := func() bool {
		total := 0
		for _, c := range cs {
			n := len(c.Status().Polled)
			if n > (bots+len(cs)-1)/len(cs) {
				return false
			}
			total += n
		}
		return total == bots
	}
	// A few lease TTLs (1.5 s each) on a quiet machine; longer on a loaded
	// one, where heartbeats time out and a holder hands over only once
	// NATS has answered it for a member TTL.
	waitFor(t, hangGuard, "the leases spread", spread)
	for _, c := range cs {
		t.Logf("%s polls %v", c.Instance(), c.Status().Polled)
	}
}

// joinWatched is join with the log lines kept and members awaited for
// returnWait after an outage.
func joinWatched(t *testing.T, url, name string, returnWait time.Duration) (*Cluster, *observer.ObservedLogs) {
	t.Helper()
	return joinLogged(t, url, name, func(cfg *Config) { cfg.ReturnWait = returnWait })
}

// joinLogged is join with the log lines kept and the test's configuration
// changed by set.
func joinLogged(t *testing.T, url, name string, set func(*Config)) (*Cluster, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	cfg := testConfig(url, name, zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)).Named(name))
	set(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, logs
}

// outageWithOneLate spreads eight partitions over a, b and c, stops the
// NATS server until every instance saw the outage and starts it again
// with b still cut off (it reconnects when gate opens). It returns the
// instances and their log lines since before the outage.
// before, if given, runs once the partitions have spread, before the
// outage.
func outageWithOneLate(t *testing.T, ctx context.Context, returnWait time.Duration, before ...func([]*Cluster)) (cs []*Cluster, logs map[string]*observer.ObservedLogs, gate *natstest.Gate) {
	server := natstest.StartServer(t)
	gate = natstest.NewGate(t, server.URL)
	logs = map[string]*observer.ObservedLogs{}
	for _, n := range []string{"a", "b", "c"} {
		url := server.URL
		if n == "b" {
			url = gate.URL
		}
		c, l := joinWatched(t, url, n, returnWait)
		c.Work(ctx, func(d *Delivery) { go d.Done(true) })
		cs, logs[n] = append(cs, c), l
	}
	// Spread, and every partition taken or released logged (the lines
	// follow the change): the lines after are the outage's.
	waitFor(t, hangGuard, "the partitions spread", func() bool {
		if !spreadOver(ctx, cs, 3) {
			return false
		}
		for _, c := range cs {
			if !slices.Equal(loggedPartitions(logs[c.Instance()]), Assign([]string{"a", "b", "c"}, c.Instance(), 8)) {
				return false
			}
		}
		return true
	})
	for _, l := range logs {
		l.TakeAll()
	}
	for _, f := range before {
		f(cs)
	}
	server.Stop()
	waitFor(t, hangGuard, "the outage seen", func() bool {
		for _, c := range cs {
			if c.Status().UnavailableSince.IsZero() {
				return false
			}
		}
		return true
	})
	gate.Shut()
	server.Restart()
	return cs, logs, gate
}

// spreadOver reports whether the partitions are spread over n members
// as Assign spreads them, each instance consuming its own.
func spreadOver(ctx context.Context, cs []*Cluster, n int) bool {
	members, err := cs[0].Members(ctx)
	if err != nil || len(members) != n {
		return false
	}
	for _, c := range cs {
		if slices.Contains(members, c.Instance()) && !slices.Equal(sorted(c.Status().Partitions), Assign(members, c.Instance(), 8)) {
			return false
		}
	}
	return true
}

// loggedPartitions are the partitions an instance's lines say it took
// and did not release.
func loggedPartitions(logs *observer.ObservedLogs) []int {
	owned := map[int64]bool{}
	for _, e := range logs.All() {
		p, _ := e.ContextMap()["partition"].(int64)
		switch e.Message {
		case "partition taken":
			owned[p] = true
		case "partition released":
			delete(owned, p)
		}
	}
	var out []int
	for p := range owned {
		out = append(out, int(p))
	}
	slices.Sort(out)
	return out
}

// logged reports whether logs hold message about member.
func logged(logs *observer.ObservedLogs, message, member string) bool {
	return logs.Filter(func(e observer.LoggedEntry) bool {
		return e.Message == message && e.ContextMap()["member"] == member
	}).Len() > 0
}

// After an outage the instances keep the partitions they had, also when
// one of them comes back long after the others (b is held back until a
// and c have had NATS for a member TTL, when the rule of one member TTL
// let them take b's partitions): none takes another's, to hand it back a
// moment later.
func TestPartitionsSettleAfterAnOutageWithoutChurn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, logs, gate := outageWithOneLate(t, ctx, hangGuard)
	moved := func() []string {
		var out []string
		for n, l := range logs {
			for _, e := range l.All() {
				if e.Message == "partition taken" || e.Message == "partition released" {
					out = append(out, fmt.Sprint(n, ": ", e.Message, " ", e.ContextMap()["partition"]))
				}
			}
		}
		return out
	}
	const awaiting = "member not back yet after the NATS outage: its partitions wait for it"
	waitFor(t, hangGuard, "a and c to wait for b", func() bool {
		if m := moved(); len(m) > 0 {
			t.Fatalf("partitions moved while b was not back: %v", m)
		}
		return logged(logs["a"], awaiting, "b") && logged(logs["c"], awaiting, "b")
	})
	gate.Open()
	waitFor(t, hangGuard, "b back", func() bool { return cs[1].Status().UnavailableSince.IsZero() })
	waitFor(t, hangGuard, "the partitions settled", func() bool { return spreadOver(ctx, cs, 3) })
	if m := moved(); len(m) > 0 {
		t.Errorf("partitions moved after the outage: %v", m)
	}
}

// A member that does not come back after an outage is taken for dead
// once the others have had NATS for the return wait: its partitions go
// to them.
func TestAMemberNotBackAfterAnOutageLeavesItsPartitions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, logs, _ := outageWithOneLate(t, ctx, 3*time.Second)
	const gone = "member not back after the NATS outage: its partitions go to the others"
	waitFor(t, hangGuard, "a and c to drop b", func() bool {
		return logged(logs["a"], gone, "b") && logged(logs["c"], gone, "b")
	})
	waitFor(t, hangGuard, "b's partitions taken", func() bool { return spreadOver(ctx, []*Cluster{cs[0], cs[2]}, 2) })
}

// A conversation's lock held by an instance slow to come back after an
// outage stays its own for the return wait, as its partitions do: it
// may still be answering, and another instance taking the lock would
// answer the conversation beside it. (Taken over after one member TTL
// of NATS, as before, a and b both held it.)
func TestAConversationLockWaitsForItsHolderAfterAnOutage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := message.Key{Bot: "alpha", Chat: 7}
	cs, logs, gate := outageWithOneLate(t, ctx, hangGuard, func(cs []*Cluster) {
		if err := cs[1].locks.lock(ctx, k); err != nil {
			t.Fatal(err)
		}
	})
	got := make(chan error, 1)
	go func() { got <- cs[0].locks.lock(ctx, k) }()
	waitFor(t, hangGuard, "a to wait for b, NATS back for two member TTLs", func() bool {
		return logged(logs["a"], "member not back yet after the NATS outage: its partitions wait for it", "b") &&
			cs[0].health.quiet(2*cs[0].cfg.MemberTTL)
	})
	select {
	case err := <-got:
		t.Fatalf("a took the lock b holds while b was not back yet (err %v)", err)
	default:
	}
	gate.Open()
	waitFor(t, hangGuard, "b back", func() bool { return cs[1].Status().UnavailableSince.IsZero() })
	cs[1].locks.unlock(k)
	if err := <-got; err != nil {
		t.Fatalf("a did not get the lock b released: %v", err)
	}
}

func sorted(ps []int) []int {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return ps
}

// A stopping instance releases its poller lease before it leaves the
// membership: the others, which find the bot still given to it, take it
// once it has left, a rebalance tick later, not a lease TTL later (here
// longer than the test waits). The bot is one the spread gives to a.
func TestALeaseReleasedBeforeItsHolderLeftIsTakenOnceItLeft(t *testing.T) {
	url := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slowLease := func(cfg *Config) { cfg.LeaseTTL = 3 * hangGuard }
	// Who polls, by instance: a member that joined a moment ago may not
	// see a yet, take the lease a released and poll before a's poll has
	// returned; one variable for all would lose that a stopped.
	var mu sync.Mutex
	polls := map[string]bool{}
	bot := "bot-0"
	for i := 1; spread([]string{"a", "b", "c"}, "a", []string{bot})[0] != "a"; i++ {
		bot = fmt.Sprint("bot-", i)
	}
	start := func(name string) (c *Cluster, work, lease context.CancelFunc) {
		c, _ = joinLogged(t, url, name, slowLease)
		workCtx, stopWork := context.WithCancel(ctx)
		c.Work(workCtx, func(d *Delivery) { go d.Done(true) })
		leaseCtx, stopLease := context.WithCancel(ctx)
		go c.Lease(leaseCtx, bot, func(ctx context.Context) error {
			mu.Lock()
			polls[name] = true
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			polls[name] = false
			mu.Unlock()
			return nil
		})
		return c, stopWork, stopLease
	}
	polling := func(name string) bool { mu.Lock(); defer mu.Unlock(); return polls[name] }
	a, stopWork, stopLease := start("a")
	waitFor(t, hangGuard, "a to poll", func() bool { return polling("a") })
	start("b")
	start("c")
	waitFor(t, hangGuard, "three members", func() bool { m, err := a.Members(ctx); return err == nil && len(m) == 3 })

	stopLease() // a stops: its poller first, while it is still a member
	waitFor(t, hangGuard, "a to stop polling", func() bool { return !polling("a") })
	time.Sleep(time.Second) // b and c have found the bot given to a
	stopWork()
	waitFor(t, hangGuard, "b or c to poll", func() bool { return polling("b") || polling("c") })
}

// A member of the spread before an outage that never beats after it is
// logged as not back once it is dropped, also when this instance did not
// look at the members while it was absent within the return wait (a
// loaded machine; here the return wait ends before the member's last
// heartbeat expires): it was dropped without a word.
func TestAMemberNotBackIsToldWhenItsHeartbeatOutlivedTheReturnWait(t *testing.T) {
	url := natstest.Start(t)
	a, logs := joinLogged(t, url, "a", func(cfg *Config) { cfg.ReturnWait = cfg.MemberTTL / 3 })
	ctx := context.Background()
	if _, err := a.updates.members.kv.Put(ctx, "b", []byte("an older member's heartbeat")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hangGuard, "a to see b", func() bool { m, err := a.Members(ctx); return err == nil && slices.Contains(m, "b") })
	a.conn.health.failed("test", errors.New("an outage")) // b beats no more from here
	a.conn.health.answered()
	const gone = "member not back after the NATS outage: its partitions go to the others"
	waitFor(t, hangGuard, "a to drop b", func() bool { m, err := a.Members(ctx); return err == nil && !slices.Contains(m, "b") })
	if !logged(logs, gone, "b") {
		t.Errorf("b, not back after the outage, was dropped without %q", gone)
	}
}
