package main

import (
	"context"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"brainbot/state"
	"brainbot/state/jetstream"
	"brainbot/state/jetstream/natstest"
)

func TestClusterSettings(t *testing.T) {
	cfg, err := parseConfig(t, map[string]string{"BRAINBOT_NATS_URL": "nats://a:4222,nats://b:4222", "BRAINBOT_INSTANCE": "x"})
	if err != nil || cfg.NATSURL != "nats://a:4222,nats://b:4222" || cfg.NATSPartitions != 0 || cfg.Instance != "x" {
		t.Fatalf("cfg %+v, err %v", cfg, err)
	}
	if cfg, err := parseConfig(t, nil); err != nil || cfg.NATSURL != "" || cfg.WebhookURL != "" {
		t.Fatalf("default: %+v, %v: the embedded default must need nothing", cfg, err)
	}
	// A webhook needs no cluster: alone, its updates go into the journal.
	if cfg, err := parseConfig(t, map[string]string{"BRAINBOT_WEBHOOK_URL": "https://x/tg"}); err != nil || cfg.WebhookURL != "https://x/tg" {
		t.Fatalf("webhook alone: %+v, %v", cfg, err)
	}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BRAINBOT_NATS_URL": "http://a:4222"}, `BRAINBOT_NATS_URL (-nats-url) "http://a:4222": must be nats://`},
		{map[string]string{"BRAINBOT_NATS_URL": "http://u:pw@a:4222"}, `BRAINBOT_NATS_URL (-nats-url) "http://***@a:4222": must be nats://`},
		{map[string]string{"BRAINBOT_NATS_URL": "nats://a", "BRAINBOT_NATS_PARTITIONS": "-1"}, `BRAINBOT_NATS_PARTITIONS (-nats-partitions) "-1": must be 1 to 1024`},
		{map[string]string{"BRAINBOT_NATS_URL": "nats://a", "BRAINBOT_NATS_REPLICAS": "7"}, `BRAINBOT_NATS_REPLICAS (-nats-replicas) "7": must be 1 to 5`},
		{map[string]string{"BRAINBOT_WEBHOOK_URL": "x/tg"}, `BRAINBOT_WEBHOOK_URL (-webhook-url) "x/tg": must be an https URL`},
		{map[string]string{"BRAINBOT_NATS_URL": "nats://a", "BRAINBOT_WEBHOOK_URL": "https://x/tg", "BRAINBOT_WEBHOOK_ADDR": "8443"},
			`BRAINBOT_WEBHOOK_ADDR (-webhook-addr) "8443": must be host:port`},
	} {
		_, err := parseConfig(t, tt.env)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("env %v: got %v, want %q", tt.env, err, tt.want)
		}
	}
}

func TestDoctorChecksNATS(t *testing.T) {
	url := natstest.Start(t)
	r := &report{}
	checkNATS(context.Background(), Config{NATSURL: url}, r)
	if r.refused() || len(r.findings) != 1 || !strings.Contains(r.findings[0].detail, "JetStream at") {
		t.Fatalf("findings %+v", r.findings)
	}
	// The admin reads which server answered and which one brainbot needs.
	if d := r.findings[0].detail; !strings.Contains(d, "nats-server "+natsserver.VERSION) || !strings.Contains(d, "needs "+jetstream.MinServerVersion) {
		t.Errorf("detail %q, want the server's version and the one needed", d)
	}
	// NATS not reached yet fails doctor, but run waits for it.
	r = &report{}
	checkNATS(context.Background(), Config{NATSURL: "nats://u:secret@127.0.0.1:9"}, r)
	if !r.failed() || r.refused() || strings.Contains(r.findings[0].detail, "secret") ||
		!strings.Contains(r.findings[0].detail, "run waits for it") {
		t.Fatalf("unreachable NATS: findings %+v", r.findings)
	}
}

// BRAINBOT_NATS_REPLICAS=3 against a single nats-server passed doctor,
// and run then exited 1 at every restart: doctor fails naming the
// setting, and run refuses to start (fatal).
func TestDoctorChecksReplicasAgainstTheServers(t *testing.T) {
	single := natstest.Start(t)
	_, cluster := natstest.StartCluster(t, 3)
	for _, c := range []struct {
		url      string
		replicas int
		want     string // "": ok
	}{
		{single, 0, ""},
		{single, 1, ""},
		{single, 3, "BRAINBOT_NATS_REPLICAS (-nats-replicas) is 3, but the NATS at " + single + " is a single server"},
		{strings.Join(cluster, ","), 3, ""},
		{cluster[0], 5, "BRAINBOT_NATS_REPLICAS (-nats-replicas) is 5, but NATS cluster brainbot has 3 servers"},
	} {
		r := &report{}
		checkNATS(context.Background(), Config{NATSURL: c.url, NATSReplicas: c.replicas}, r)
		switch {
		case c.want == "" && r.failed():
			t.Errorf("%d replicas on %s: %+v, want ok", c.replicas, c.url, r.findings)
		case c.want != "" && (!r.refused() || !strings.Contains(r.findings[0].detail, c.want)):
			t.Errorf("%d replicas on %s: %+v, want a refusal saying %q", c.replicas, c.url, r.findings, c.want)
		}
	}
	code, stdout, _ := runMain(t, []string{"BRAINBOT_NATS_URL=" + single, "BRAINBOT_NATS_REPLICAS=3", "BRAINBOT_DATA=" + t.TempDir()}, "doctor")
	if code != exitError || !strings.Contains(stdout, "fail  NATS: BRAINBOT_NATS_REPLICAS (-nats-replicas) is 3, but the NATS at") {
		t.Errorf("doctor = %d:\n%s", code, stdout)
	}
}

// In a cluster, `brainbot usage` reads the records every instance keeps
// in the usage stream.
func TestUsageReportOfACluster(t *testing.T) {
	url := natstest.Start(t)
	ctx := context.Background()
	c, err := jetstream.Connect(ctx, jetstream.Config{URL: url, Instance: "u"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Now()
	for _, u := range []state.Usage{
		{At: now, Bot: "voice", User: 1, Mode: "speech", Outcome: "ok", ClaudeUSD: 0.012, OpenAIUSD: 0.003},
		{At: now, Bot: "voice", User: 2, Mode: "speech", Outcome: "error", ClaudeUSD: 0.01},
		{At: now, Bot: "chat", User: 3, Mode: "text", Outcome: "ok", ClaudeUSD: 0.5},
	} {
		if err := c.State().RecordUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runMain(t, []string{"BRAINBOT_NATS_URL=" + url, "BRAINBOT_DATA=" + t.TempDir()}, "usage", "-brain", "voice")
	if code != exitOK {
		t.Fatalf("usage = %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "voice") || !strings.Contains(lines[1], "speech") || !strings.Contains(lines[2], "0.0250") {
		t.Errorf("usage -brain voice in a cluster:\n%s", stdout)
	}
}
