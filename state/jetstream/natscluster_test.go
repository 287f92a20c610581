package jetstream

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"brainbot/state/jetstream/natstest"
)

// On a three-node NATS cluster with three replicas, the instances go on
// when a NATS node dies: every update is answered exactly once, and the
// poller lease still works.
func TestSurvivesANATSNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node NATS cluster")
	}
	servers, urls := natstest.StartCluster(t, 3)
	connect := func(name string) *Cluster {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := Connect(ctx, Config{URL: strings.Join(urls, ","), Instance: name, Partitions: 4, Replicas: 3,
			LeaseTTL: 1500 * time.Millisecond, MemberTTL: 1500 * time.Millisecond, PinnedTTL: 1500 * time.Millisecond,
			AckWait: 2 * time.Second, Log: zaptest.NewLogger(t).Named(name)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	a, b := connect("a"), connect("b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newGot()
	a.Work(ctx, func(d *Delivery) { g.record("a", d); go d.Done(true) })
	b.Work(ctx, func(d *Delivery) { g.record("b", d); go d.Done(true) })
	var polling atomic.Int32
	go a.Lease(ctx, "bot", func(ctx context.Context) error { polling.Add(1); <-ctx.Done(); polling.Add(-1); return nil })
	go b.Lease(ctx, "bot", func(ctx context.Context) error { polling.Add(1); <-ctx.Done(); polling.Add(-1); return nil })

	publishRange := func(from, to int64) {
		for id := from; id < to; id++ {
			deadline := time.Now().Add(20 * time.Second)
			for {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				err := publish(pctx, a, id%7, id, update(id, id%7, "x"))
				pcancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("publish %d: %v", id, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	publishRange(1, 21)
	waitFor(t, hangGuard, "the first 20", func() bool { return g.count() == 20 })
	servers[0].Shutdown() // a NATS node dies
	publishRange(21, 41)
	waitFor(t, hangGuard, "all 40 after the node died", func() bool { return g.count() == 40 })
	time.Sleep(500 * time.Millisecond)
	g.mu.Lock()
	for id, n := range g.all {
		if n != 1 {
			t.Errorf("update %d answered %d times", id, n)
		}
	}
	g.mu.Unlock()
	if n := polling.Load(); n != 1 {
		t.Errorf("%d pollers", n)
	}
}

// Three instances started together on a fresh three-node NATS cluster all
// join: creating the streams, consumers and buckets is idempotent, and a
// creation the cluster is too busy to answer in time is tried again.
func TestInstancesStartTogetherOnAFreshCluster(t *testing.T) {
	_, urls := natstest.StartCluster(t, 3)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			name := fmt.Sprintf("i%d", i)
			c, err := Connect(ctx, Config{URL: strings.Join(urls, ","), Instance: name, Replicas: 3,
				Log: zaptest.NewLogger(t).Named(name)})
			if err == nil {
				t.Cleanup(c.Close)
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
