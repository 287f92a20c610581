package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"brainbot/message"
	"brainbot/state/jetstream"
	"brainbot/state/jetstream/natstest"
	"brainbot/state/sqlite"
)

// The carry refuses while what it carries may still change, and says
// what runs: an instance of the cluster (either way), or the one
// instance at this machine's admin address. It writes nothing then.
func TestCarryRefusesWhileTheServiceRuns(t *testing.T) {
	url := natstest.Start(t)
	data := t.TempDir()
	env := []string{"BRAINBOT_NATS_URL=" + url, "BRAINBOT_DATA=" + data}

	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	code, _, stderr := runMain(t, append(env, "BRAINBOT_HTTP_ADDR="+admin.Addr().String()), "carry", "-to", "cluster")
	if code != exitError || !strings.Contains(stderr, "something answers at "+admin.Addr().String()) {
		t.Errorf("carry with the service answering = %d, %s", code, stderr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := jetstream.Connect(ctx, jetstream.Config{URL: url, Instance: "k7"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// k7 holds an update of alpha's, not answered yet: the refusal says
	// the stream is not drained.
	update := message.Envelope{Bot: "alpha", UpdateID: 1, Key: message.Key{Bot: "alpha", Chat: 7}, Raw: []byte(`{"update_id":1}`)}
	if err := c.Publish(ctx, update); err != nil {
		t.Fatal(err)
	}
	c.Work(ctx, func(*jetstream.Delivery) {})
	for _, to := range []string{"sqlite", "cluster"} {
		code, _, stderr := runMain(t, env, "carry", "-to", to)
		if code != exitError || !strings.Contains(stderr, "instances of the cluster are running (k7)") ||
			!strings.Contains(stderr, "pending in the stream: 1 message not answered yet (alpha 1)") {
			t.Errorf("carry -to %s with k7 running = %d, %s", to, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(data, sqlite.FileName)); !os.IsNotExist(err) {
		t.Errorf("a refused carry made %s: %v", sqlite.FileName, err)
	}
}
