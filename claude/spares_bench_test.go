package claude

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"brainbot/claude/claudetest"
	"brainbot/mcp/toolstest"
)

// BenchmarkNewConversation: the first message of a new conversation
// through the real CLI (--bare, as with an API key) and the scripted
// model, with spares and with spares off, in one run: the time from Run
// to the model receiving the request (the model's own timestamp), p50 and
// p99; and the resident memory of one spare. With spares, each message
// finds its spare ready (the benchmark waits for the replacement between
// messages, as a bot whose new conversations come less often than a CLI
// starts). Goal: with spares, p50 <= 100 ms.
func BenchmarkNewConversation(b *testing.B) {
	cli := claudetest.RequireCLI(b)
	model := claudetest.NewModel()
	defer model.Close()
	measure := func(spares int) []float64 {
		dir := b.TempDir()
		data := filepath.Join(dir, "data")
		tools := toolstest.Start(b, data, nil)
		d, err := New(Config{Command: cli, DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets,
			Env: append(model.Env(), "HOME="+filepath.Join(dir, "home")), Bare: true, Warm: WarmConfig{Max: 4, Spares: spares}})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		run := func(i int) time.Duration {
			prompt := fmt.Sprintf("new conversation %d with %d spares", i, spares)
			conversation := fmt.Sprint("bench/", i)
			req := Request{Mode: Text, Prompt: prompt, Conversation: conversation, SystemPrompt: clockPrompt, BotID: "bench",
				PromptVars: withClock(Request{}, "Ann", "09:00 UTC").PromptVars}
			start := time.Now()
			res, err := d.Run(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			if i >= 0 && res.Spare != (spares > 0) {
				b.Fatalf("spare %v with %d spares", res.Spare, spares)
			}
			d.End(conversation)
			for _, r := range slices.Backward(model.Requests()) {
				if slices.Contains(userTexts([]claudetest.Request{r}), prompt) {
					return r.At.Sub(start)
				}
			}
			b.Fatalf("the model never got %q", prompt)
			return 0
		}
		run(-1) // the bot's first conversation: its spares start
		var lat []float64
		for i := range b.N {
			if spares > 0 {
				waitSpares(b, d, readySpares(spares))
				if i == 0 {
					b.ReportMetric(float64(spareRSS(b, d)), "spare-rss-MB")
				}
			}
			lat = append(lat, float64(run(i).Microseconds())/1000)
		}
		slices.Sort(lat)
		return lat
	}
	with, without := measure(1), measure(0)
	b.ReportMetric(with[len(with)/2], "spares-p50-ms")
	b.ReportMetric(with[len(with)*99/100], "spares-p99-ms")
	b.ReportMetric(without[len(without)/2], "cold-p50-ms")
	b.ReportMetric(without[len(without)*99/100], "cold-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// spareRSS is the resident memory of one of d's ready spares, in MB.
func spareRSS(b *testing.B, d *Driver) int {
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	for _, set := range d.pool.spares.sets {
		for _, sp := range set.spares {
			if sp.ready {
				return sp.cli.residentMB()
			}
		}
	}
	b.Fatal("no spare ready")
	return 0
}
