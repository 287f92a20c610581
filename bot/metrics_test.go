package bot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"brainbot/metrics"
)

// The metrics an admin watches follow what happens to messages.
func TestMetricsFollowTraffic(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, func(c *Config) { c.Metrics = reg })
	h.exchange(tokenA, 7, "one")
	h.srv.Flood(tokenA, "sendMessage", 1, 1)
	h.exchange(tokenA, 7, "two")
	h.exchange(tokenA, 7, "please #fail")
	raw, err := os.ReadFile(filepath.Join("telegram", "testdata", "undecodable", "reaction.json"))
	if err != nil {
		t.Fatal(err)
	}
	h.srv.SendUpdate(tokenA, raw)
	h.exchange(tokenA, 7, "probe")
	waitSummaries(t, h.logs, 4)

	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"requests ok", testutil.ToFloat64(reg.Requests.WithLabelValues("alpha", "text", "ok")), 3},
		{"requests failed", testutil.ToFloat64(reg.Requests.WithLabelValues("alpha", "text", "error")), 1},
		{"429s of sendMessage", testutil.ToFloat64(reg.TelegramErrors.WithLabelValues("alpha", "sendMessage", "429")), 1},
		{"undecodable updates", testutil.ToFloat64(reg.UndecodableUpdates.WithLabelValues("alpha")), 1},
		{"input tokens of the three answered", testutil.ToFloat64(reg.Tokens.WithLabelValues("alpha", "input")), 3000},
		{"Claude running after the work", testutil.ToFloat64(reg.ClaudeRunning), 0},
		// queue_wait, upload and total; the fake Claude reports no CLI
		// times, and a stage that did not happen is not observed.
		{"stages observed", float64(testutil.CollectAndCount(reg.Stage, "brainbot_request_stage_seconds")), 3},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if cost := testutil.ToFloat64(reg.CostUSD.WithLabelValues("alpha", metrics.ProviderClaude)); cost < 0.029 {
		t.Errorf("cost = %v, want the three answered requests' 0.03", cost)
	}
	if err := h.m.Ready(); err != nil {
		t.Errorf("Ready after polling = %v", err)
	}
}

// A token revoked while the bot polls: polling's 401 is counted (the
// alert on it fires, naming the bot) and /readyz fails at once, not when the last poll
// grows old; once Telegram takes the token again the bot is ready again.
func TestRevokedTokenIsCountedAndNotReady(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, func(c *Config) { c.Metrics = reg })
	h.exchange(tokenA, 7, "one")
	if err := h.m.Ready(); err != nil {
		t.Fatalf("Ready while polling = %v", err)
	}
	h.srv.Unauthorize(tokenA)
	h.waitLog("telegram bot not running; retrying")
	if err := h.m.Ready(); err == nil || !strings.Contains(err.Error(), "alpha (token rejected)") {
		t.Errorf("Ready after a 401 = %v, want alpha's token rejected", err)
	}
	if n := testutil.ToFloat64(reg.TelegramErrors.WithLabelValues("alpha", "getUpdates", "401")); n != 1 {
		t.Errorf("getUpdates 401s = %v, want 1", n)
	}
	waitFor(t, func() bool {
		return testutil.ToFloat64(reg.TelegramErrors.WithLabelValues("alpha", "getMe", "401")) > 0
	})
	h.srv.ClearFailures(tokenA)
	waitFor(t, func() bool { return h.m.Ready() == nil })
}

// A brain file broken in the live folder is counted (the alert on it
// fires) while the other bots run and /readyz stays ready; an edit that
// breaks a running bot's file counts too, its last good version running
// on; fixed, the count is back to 0.
func TestBrokenBrainFilesAreCountedAndReadyStays(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, ""), "broken": "name: Broken\nsytem_prompt: Hi.\n"},
		func(c *Config) { c.Metrics = reg })
	h.exchange(tokenA, 7, "one")
	if got := testutil.ToFloat64(reg.BrainFilesInvalid); got != 1 {
		t.Errorf("brain files with problems = %v, want 1", got)
	}
	if err := h.m.Ready(); err != nil {
		t.Errorf("Ready beside a broken brain file = %v", err)
	}
	h.writeBrain("alpha", "name: Alpha\ntelegram:\n\ttoken: x\n")
	waitFor(t, func() bool { return testutil.ToFloat64(reg.BrainFilesInvalid) == 2 })
	if got := h.exchange(tokenA, 7, "two"); got.Param("text") != "You said: two" {
		t.Errorf("alpha's last good version answered %q", got.Param("text"))
	}
	h.writeBrain("alpha", brainFile(tokenA, ""))
	h.writeBrain("broken", brainFile(tokenB, ""))
	waitFor(t, func() bool { return testutil.ToFloat64(reg.BrainFilesInvalid) == 0 })
}
