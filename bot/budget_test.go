package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"brainbot/metrics"
	"brainbot/state"
)

// A bot's daily spending cap: once today's cost (Claude's and OpenAI's)
// reaches it, users get messages.spending_cap (not the message limit's
// text) and the admin one warn line a day; the cap is a metric for the
// alert on spending near it. The fake Claude costs $0.01 a request; a
// dall-e-2 256x256 image $0.016.
func TestDailySpendingCaps(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, "limits:\n  daily_usd: 0.015\nmessages:\n  spending_cap: Spent up; back {reset}.\n  limit: Wrong text.\n"),
		"beta":  brainFile(tokenB, "limits:\n  per_user_daily_usd: 0.02\nimage:\n  enabled: true\n"),
	}, func(c *Config) { c.Metrics = reg })
	h.exchange(tokenA, 1, "one")
	h.exchange(tokenA, 2, "two") // $0.01 spent: under the cap, answered
	waitSummaries(t, h.logs, 2)  // their cost is recorded
	if got := testutil.ToFloat64(reg.SpendingCap.WithLabelValues("alpha")); got != 0.015 {
		t.Errorf("alpha's spending cap metric = %v, want 0.015", got)
	}
	for _, user := range []int64{1, 3} {
		if got := h.exchange(tokenA, user, "more"); got.Param("text")[:9] != "Spent up;" {
			t.Fatalf("over the cap, user %d got %q", user, got.Param("text"))
		}
	}
	if n := len(h.logs.FilterMessage("daily spending cap reached: the bot answers no more messages today").All()); n != 1 {
		t.Errorf("%d warn lines about the cap, want 1", n)
	}
	// Per user: user 5's picture ($0.01 + $0.016) uses up their cap, not
	// user 6's.
	if got := h.exchange(tokenB, 5, "draw a cat"); got.Method != "sendPhoto" {
		t.Fatalf("picture = %s", got.Method)
	}
	waitSummaries(t, h.logs, 5)
	if got := h.exchange(tokenB, 5, "and now?"); !strings.HasPrefix(got.Param("text"), "I can't answer any more messages today: today's budget is spent.") {
		t.Errorf("user over their cap got %q", got.Param("text"))
	}
	if got := h.exchange(tokenB, 6, "hello"); got.Param("text") != "You said: hello" {
		t.Errorf("another user got %q", got.Param("text"))
	}

	waitSummaries(t, h.logs, 7)
	lines, err := h.store.UsageReport(context.Background(), state.UsageFilter{Since: time.Now().Add(-time.Hour), Bot: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0].Mode != "image" || !near(lines[0].OpenAIUSD, 0.016) || !near(lines[0].ClaudeUSD, 0.01) ||
		lines[0].InputTokens != 1000 || lines[0].OutputTokens != 20 || lines[0].CacheReadTokens != 500 ||
		lines[1].Mode != "text" || lines[1].Requests != 1 {
		t.Errorf("beta's usage = %+v", lines)
	}
	var capped int
	for _, e := range h.logs.FilterMessage("request").All() {
		f := e.ContextMap()
		if f["mode"] == "image" && f["openai_usd"] != 0.016 {
			t.Errorf("image request line openai_usd = %v", f["openai_usd"])
		}
		if f["outcome"] == "spending cap" {
			capped++
		}
	}
	if capped != 3 {
		t.Errorf("%d requests with outcome spending cap, want 3", capped)
	}
	if got := testutil.ToFloat64(reg.CostUSD.WithLabelValues("beta", metrics.ProviderOpenAI)); !near(got, 0.016) {
		t.Errorf("beta's OpenAI spending metric = %v, want the picture's 0.016", got)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// A request the CLI stopped at one of the brain's bounds (claude.max_turns,
// claude.max_budget_usd) gets the brain's error text, even a voice reply
// whose words were ready: the owner said "no further".
func TestBoundedRequestGetsTheErrorText(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "tts:\n  enabled: true\nmessages:\n  error: Not this time.\n")}, nil)
	if got := h.exchange(tokenA, 7, "go on and on #bounded"); got.Method != "sendMessage" || got.Param("text") != "Not this time." {
		t.Fatalf("bounded voice request got %s %q, want the error text", got.Method, got.Param("text"))
	}
	e := h.waitLog("request failed")
	if !strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "stopped at a bound") {
		t.Errorf("log line = %v", e.ContextMap())
	}
}
