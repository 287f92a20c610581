package jetstream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"brainbot/state"
	"brainbot/state/jetstream"
	"brainbot/state/jetstream/natstest"
	"brainbot/state/statetest"
)

// The cluster backend passes the conformance suite: each subtest on a new
// nats-server of its own; a restart stops the instance as `brainbot run`
// does (Release, then Close) and connects the next one under another
// name. The timings are short, so a restart hands over at once.
func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T, dataDir string, sessionFile func(bot, session string) string) (state.Backend, func() state.Backend) {
		url := natstest.Start(t)
		instances := 0
		connect := func() *jetstream.Cluster {
			instances++
			name := fmt.Sprintf("instance-%d", instances)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := jetstream.Connect(ctx, jetstream.Config{URL: url, Instance: name, Partitions: 2,
				LeaseTTL: 1500 * time.Millisecond, MemberTTL: 1500 * time.Millisecond, PinnedTTL: 1500 * time.Millisecond,
				AckWait: 2 * time.Second, Patience: 5 * time.Second, SpoolDir: filepath.Join(dataDir, "cluster-spool"), Log: zaptest.NewLogger(t).Named(name)})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		current := connect()
		t.Cleanup(func() { current.Release(); current.Close() })
		restart := func() state.Backend {
			current.Release()
			current.Close()
			current = connect()
			return current.Backend(sessionFile)
		}
		return current.Backend(sessionFile), restart
	})
}
