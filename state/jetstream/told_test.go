package jetstream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/state/jetstream/natstest"
)

// joinObserved joins the cluster at url with its log lines kept.
func joinObserved(t *testing.T, url string, cfg Config) (*Cluster, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	cfg.URL, cfg.Instance, cfg.Partitions, cfg.Log = url, "i", 2, zap.New(core)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, logs
}

// lines are the messages logged that begin with prefix.
func lines(logs *observer.ObservedLogs, prefix string) []observer.LoggedEntry {
	return logs.Filter(func(e observer.LoggedEntry) bool { return strings.HasPrefix(e.Message, prefix) }).All()
}

// An error the NATS client has no call to return to (here a slow
// consumer) is one of brainbot's log lines, not a raw line on stderr.
func TestClientErrorsAreLogged(t *testing.T) {
	c, logs := joinObserved(t, natstest.Start(t), Config{})
	defer c.Close()
	release := make(chan struct{})
	defer close(release)
	sub, err := c.nc.Subscribe("told.slow", func(*nats.Msg) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(1, -1); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := c.nc.Publish("told.slow", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hangGuard, "the client's error logged", func() bool { return len(lines(logs, "NATS client error")) > 0 })
	e := lines(logs, "NATS client error")[0]
	fields := e.ContextMap()
	if e.Level != zap.WarnLevel || fields["subject"] != "told.slow" || !strings.Contains(fields["error"].(string), "slow consumer") {
		t.Errorf("logged %v %q %v", e.Level, e.Message, fields)
	}
}

// Closing the connection is a stop, not an outage: nothing is logged of
// it once Close returns, nor before.
func TestCloseSaysNothingOfAnOutage(t *testing.T) {
	c, logs := joinObserved(t, natstest.Start(t), Config{})
	c.Close()
	if l := lines(logs, "NATS unavailable"); len(l) != 0 {
		t.Errorf("Close logged %v", l[0].Message)
	}
}

// `poller lease lost` says why: the lease taken by another, or NATS gone.
func TestLeaseLostSaysWhy(t *testing.T) {
	server := natstest.StartServer(t)
	c, logs := joinObserved(t, server.URL, Config{LeaseTTL: 900 * time.Millisecond, Patience: 500 * time.Millisecond})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polling := make(chan bool, 8)
	go func() {
		_ = c.Lease(ctx, "bot", func(ctx context.Context) error { polling <- true; <-ctx.Done(); return nil })
	}()
	<-polling
	lost := func(n int) map[string]any {
		waitFor(t, hangGuard, "the lease lost", func() bool { return len(lines(logs, "poller lease lost")) >= n })
		return lines(logs, "poller lease lost")[n-1].ContextMap()
	}
	if _, err := c.leases.kv.Put(ctx, "bot", []byte("another")); err != nil {
		t.Fatal(err)
	}
	if f := lost(1); f["cause"] != "lease expired or taken over" {
		t.Errorf("lease taken by another: logged %v", f)
	}
	<-polling // the other's lease expired: this one polls again
	server.Stop()
	defer server.Restart()
	if f := lost(2); f["cause"] != "nats unavailable" {
		t.Errorf("NATS stopped: logged %v", f)
	}
}
