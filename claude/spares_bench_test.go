package claude

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"brainbot/claude/claudetest"
	"brainbot/mcp/toolstest"
	"brainbot/sysmem"
)

// BenchmarkNewConversation: the first message of a new conversation
// through the real CLI (--bare, as with an API key) and the scripted
// model, with spares and with spares off, in one run: the time from Run
// to the model receiving the request (the model's own timestamp), p50 and
// p99; and the resident memory of one spare. With spares, each message
// finds its spare ready and done with its start-up (the benchmark waits
// for the replacement to be ready and idle between messages, as for a bot
// whose new conversations come less often than a CLI starts). Goal: with
// spares, p50 <= 100 ms.
func BenchmarkNewConversation(b *testing.B) {
	cli := claudetest.RequireCLI(b)
	model := claudetest.NewModel()
	defer model.Close()
	measure := func(spares int) []float64 {
		d, dir := benchDriver(b, cli, model, WarmConfig{Max: 4, Spares: spares})
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
				claudetest.WaitQuiet(b, dir)
				if i == 0 {
					b.ReportMetric(float64(spareRSS(b, dir)), "spare-rss-MB")
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

// BenchmarkPanelTurns: the Claude side of the demo panel (three members;
// turn 1 all three, turn 2 all three with a JSON schema naming the other
// two, turn 3 two of them, each turn's requests at once) through the real
// CLI and the scripted model, with spares and without, in one run: the
// panel's time from its first request to its last answer. With spares, the
// host keeps two of each member's plain turn (turns 1 and 3) and one of its
// turn 2 (KeepSpares), started before the panel and done with their
// start-up.
func BenchmarkPanelTurns(b *testing.B) {
	cli := claudetest.RequireCLI(b)
	model := claudetest.NewModel()
	defer model.Close()
	members := []string{"voice", "painter", "critic"}
	shape := func(member string, turn int) Request {
		req := Request{Mode: Text, SystemPrompt: "You are " + member + ", on a panel.", BotID: member}
		if turn == 2 {
			others := slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == member })
			req.JSONSchema = fmt.Sprintf(`{"type":"object","properties":{"target":{"type":"string","enum":[%q,%q]},"comment":{"type":"string"}},"required":["target","comment"]}`, others[0], others[1])
		}
		return req
	}
	measure := func(spares bool) []float64 {
		d, dir := benchDriver(b, cli, model, WarmConfig{Max: 12, Spares: 1})
		defer d.Close()
		if spares {
			for _, m := range members {
				// Turns 1 and 3 are of one shape, turn 2 of another.
				if err := errors.Join(d.KeepSpares("panel/"+m, shape(m, 1), 2), d.KeepSpares("panel/"+m+"/2", shape(m, 2), 1)); err != nil {
					b.Fatal(err)
				}
			}
		}
		var times []float64
		for range b.N {
			if spares {
				waitSpares(b, d, readySpares(len(members)*3))
				claudetest.WaitQuiet(b, dir)
			}
			start := time.Now()
			for turn := 1; turn <= 3; turn++ {
				var wg sync.WaitGroup
				for i, m := range members {
					if turn == 3 && i == 2 {
						continue // the demo's critic gets no comment
					}
					wg.Go(func() {
						req := shape(m, turn)
						req.Prompt = fmt.Sprintf("turn %d for %s", turn, m)
						if res, err := d.Run(context.Background(), req); err != nil || res.Spare != spares {
							b.Errorf("turn %d of %s: %v, spare %v", turn, m, err, res != nil && res.Spare)
						}
					})
				}
				wg.Wait()
			}
			times = append(times, float64(time.Since(start).Microseconds())/1000)
		}
		slices.Sort(times)
		return times
	}
	with, without := measure(true), measure(false)
	b.ReportMetric(with[len(with)/2], "spares-p50-ms")
	b.ReportMetric(without[len(without)/2], "cold-p50-ms")
	b.ReportMetric(0, "ns/op")
}

// benchDriver is a driver as production runs it (--bare) against model,
// in a folder of its own (dir, where its CLIs' HOME is).
func benchDriver(b *testing.B, cli string, model *claudetest.Model, warm WarmConfig) (d *Driver, dir string) {
	dir = b.TempDir()
	data := filepath.Join(dir, "data")
	tools := toolstest.Start(b, data, nil)
	d, err := New(Config{Command: cli, DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets,
		Env: append(model.Env(), "HOME="+filepath.Join(dir, "home")), Bare: true, Warm: warm})
	if err != nil {
		b.Fatal(err)
	}
	return d, dir
}

// spareRSS is the resident memory of one of d's spares, in MB: the only
// CLIs under dir, whose conversations all ended.
func spareRSS(b *testing.B, dir string) int {
	procs := claudetest.ProcessesUnder(dir)
	if len(procs) == 0 {
		b.Fatal("no spare running")
	}
	rss, err := sysmem.Host().Resident(procs[0].PID)
	if err != nil {
		b.Fatal(err)
	}
	return int(rss >> 20)
}
