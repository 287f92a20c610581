package jetstream

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
	// A few lease TTLs (1.5 s each): the bound is what is checked.
	waitFor(t, 10*time.Second, "the leases spread", spread)
	for _, c := range cs {
		t.Logf("%s polls %v", c.Instance(), c.Status().Polled)
	}
}

// After an outage the instances keep the partitions they had: none takes
// another's while the others' heartbeats are not back yet, to hand it
// back a moment later.
func TestPartitionsSettleAfterAnOutageWithoutChurn(t *testing.T) {
	server := natstest.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cs []*Cluster
	for _, n := range []string{"a", "b", "c"} {
		c := join(t, server.URL, n)
		c.Work(ctx, func(d *Delivery) { go d.Done(true) })
		cs = append(cs, c)
	}
	settled := func() bool {
		members, err := cs[0].Members(ctx)
		if err != nil || len(members) != 3 {
			return false
		}
		for _, c := range cs {
			if !slices.Equal(sorted(c.Status().Partitions), Assign(members, c.Instance(), 8)) {
				return false
			}
		}
		return true
	}
	waitFor(t, hangGuard, "the partitions spread", settled)
	before := map[string][]int{}
	for _, c := range cs {
		before[c.Instance()] = sorted(c.Status().Partitions)
	}
	// Record every instance's partitions from now on.
	var mu sync.Mutex
	grew := map[string][]int{}
	rec, stopRec := context.WithCancel(ctx)
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		for rec.Err() == nil {
			for _, c := range cs {
				for _, p := range c.Status().Partitions {
					if !slices.Contains(before[c.Instance()], p) {
						mu.Lock()
						grew[c.Instance()] = append(grew[c.Instance()], p)
						mu.Unlock()
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	server.Stop()
	waitFor(t, hangGuard, "the outage seen", func() bool {
		for _, c := range cs {
			if c.Status().UnavailableSince.IsZero() {
				return false
			}
		}
		return true
	})
	time.Sleep(3 * time.Second) // the outage: longer than the member TTL (1.5 s)
	server.Restart()
	waitFor(t, hangGuard, "the outage over", func() bool {
		for _, c := range cs {
			if !c.Status().UnavailableSince.IsZero() {
				return false
			}
		}
		return true
	})
	waitFor(t, hangGuard, "the partitions settled", settled)
	time.Sleep(3 * time.Second) // a while after: the member TTL twice
	stopRec()
	<-recorded
	mu.Lock()
	defer mu.Unlock()
	for name, ps := range grew {
		slices.Sort(ps)
		t.Errorf("%s took partitions %v after the outage, not its own (%v)", name, slices.Compact(ps), before[name])
	}
	if !settled() {
		t.Error("the partitions did not stay spread after the outage")
	}
}

func sorted(ps []int) []int {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return ps
}
