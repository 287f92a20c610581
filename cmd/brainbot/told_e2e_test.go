package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notJSON fails the test for every line the instance wrote to stderr in
// JSON mode that is not JSON: the NATS client's own included.
func notJSON(t *testing.T, in *instance) {
	t.Helper()
	in.logs.mu.Lock()
	defer in.logs.mu.Unlock()
	for _, line := range in.logs.notJSON {
		t.Errorf("%s wrote a line that is not JSON: %q", in.name, line)
	}
}

// Three replicas asked of a nats-server that is not clustered is a
// refusal no restart changes: `run` ends at once with exit code 2 (the
// unit does not restart it), and its lines, in JSON like every other,
// name the setting.
func TestClusterRefusalEndsTheStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a brainbot process")
	}
	c := newCluster(t, []string{"alpha"}, 0)
	started := time.Now()
	in := c.launch("i0", "BRAINBOT_NATS_REPLICAS=3")
	select {
	case <-in.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("run still retries a permanent refusal; log: %s", c.tail("i0"))
	}
	t.Logf("run ended %v after its start", time.Since(started).Round(time.Millisecond))
	if code := in.cmd.ProcessState.ExitCode(); code != exitUsage {
		t.Errorf("exit code %d, want %d", code, exitUsage)
	}
	notJSON(t, in)
	named := in.logs.count(func(l map[string]any) bool {
		return l["level"] == "error" && strings.Contains(fmt.Sprint(l["detail"]), "BRAINBOT_NATS_REPLICAS (-nats-replicas) is 3") &&
			strings.Contains(fmt.Sprint(l["detail"]), "single server")
	})
	if named != 1 {
		t.Errorf("no error line names BRAINBOT_NATS_REPLICAS and the single server; log: %s", c.tail("i0"))
	}
	if n := in.logs.count(func(l map[string]any) bool { return strings.Contains(fmt.Sprint(l["msg"]), "trying again") }); n != 0 {
		t.Errorf("%d retries logged", n)
	}
}

// Every line an instance writes in JSON mode is JSON, through a NATS
// outage too (the NATS client's own complaints included), and a clean
// stop says nothing of an outage.
func TestClusterLogsAreJSONAndAStopIsNoOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two brainbot processes")
	}
	c := newCluster(t, []string{"alpha"}, 0)
	admin := "BRAINBOT_HTTP_ADDR=127.0.0.1:0"
	first := c.start("i0", admin)
	second := c.start("i1", admin)
	outage := func(l map[string]any) bool { return strings.HasPrefix(fmt.Sprint(l["msg"]), "NATS unavailable") }

	c.kill("i1", syscall.SIGTERM)
	if n := second.logs.count(outage); n != 0 {
		t.Errorf("a clean stop logged %d NATS outages; log: %s", n, c.tail("i1"))
	}

	c.outage(2 * time.Second)
	before := first.logs.count(outage)
	c.kill("i0", syscall.SIGTERM)
	if n := first.logs.count(outage); n != before {
		t.Errorf("a clean stop after an outage logged %d NATS outages more; log: %s", n-before, c.tail("i0"))
	}
	notJSON(t, first)
	notJSON(t, second)
}
