package bot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"brainbot/message"
)

// benchHarness is a running bot with an instant fake Claude and 10,000
// stored sessions, as in production after a while. Its bot lets every
// user of a wave wait for a Claude slot: a wave measures answers, not
// the busy notices of an overloaded bot.
func benchHarness(b *testing.B) *harness {
	h := newHarness(b, map[string]string{"alpha": brainFile(tokenA, "")}, func(c *Config) {
		c.QueueSize = 1000
		c.MaxWaitingPerBot = 1000
		c.ChatActionEvery = time.Minute
	})
	ctx := context.Background()
	for u := int64(100_000); u < 110_000; u++ {
		if err := h.store.UseSession(ctx, message.Key{Bot: "alpha", Chat: u}, fmt.Sprintf("session-%d", u), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	h.exchange(tokenA, 1, "warm up")
	return h
}

// wave sends one message from each of users at once and returns each
// message's time from being queued at the stand-in to the reply arriving.
func wave(b *testing.B, h *harness, users int, seq *int) []time.Duration {
	before := len(h.srv.Sent(tokenA))
	queued := make(map[string]time.Time, users)
	for u := range users {
		*seq++
		text := "m" + strconv.Itoa(*seq)
		queued["You said: "+text] = time.Now()
		h.srv.SendText(tokenA, int64(u+1), int64(u+1), text)
	}
	got, err := h.srv.WaitFor(context.Background(), tokenA, before+users)
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, users)
	for _, c := range got[before:] {
		at, ok := queued[c.Param("text")]
		if !ok { // a latency from the zero time would pass for a p99
			b.Fatalf("a reply that answers no message of the wave: %s %q", c.Method, c.Param("text"))
		}
		lat = append(lat, c.Time.Sub(at))
	}
	return lat
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkOverhead measures the bot's own time per message, one at a
// time: update queued at the Bot API stand-in → long poll → journal →
// queue → (instant) Claude → sendMessage received by the stand-in.
// Target: p50 <= 5 ms.
func BenchmarkOverhead(b *testing.B) {
	h := benchHarness(b)
	var lat []time.Duration
	seq := 0
	for b.Loop() {
		lat = append(lat, wave(b, h, 1, &seq)...)
	}
	reportLatency(b, lat)
}

// BenchmarkConcurrentUsers sends one message from each of 200 users at
// once per iteration and reports messages/s, latency percentiles and the
// process's resident memory with 10,000 stored sessions (target <= 60 MB).
func BenchmarkConcurrentUsers(b *testing.B) {
	const users = 200
	h := benchHarness(b)
	var lat []time.Duration
	seq := 0
	start := time.Now()
	for b.Loop() {
		lat = append(lat, wave(b, h, users, &seq)...)
	}
	b.ReportMetric(float64(len(lat))/time.Since(start).Seconds(), "msgs/s")
	reportLatency(b, lat)
	runtime.GC()
	if rss, ok := residentMB(); ok {
		b.ReportMetric(rss, "rss-MB")
	}
	b.ReportMetric(0, "ns/op")
}

// residentMB reads VmRSS from /proc (Linux only). It covers the test
// binary as a whole, stand-in included: an upper bound for the bot.
func residentMB() (float64, bool) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(status) {
		if rest, ok := strings.CutPrefix(string(line), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}

// BenchmarkCrowd: 3 bots x 200 users send one message each at once, bot
// after bot, to 4 Claude slots and a fake CLI that takes 20 ms a turn.
// Slots go to the bots in turn, so the last bot's users wait about as
// long as the first's (a single first-come queue would make them wait for
// all 400 before them). It reports each bot's p50/p99 queue wait (from the
// summary lines), the slowest bot's p50 over the fastest's (target <= 2),
// Telegram calls per second, peak goroutines and RSS.
func BenchmarkCrowd(b *testing.B) {
	const users, turn = 200, 20 * time.Millisecond
	bots := []string{"alpha", "beta", "gamma"}
	tokens := map[string]string{"alpha": tokenA, "beta": tokenB, "gamma": tokenC}
	brains := map[string]string{}
	for _, id := range bots {
		brains[id] = brainFile(tokens[id], "")
	}
	h := newHarness(b, brains, func(c *Config) {
		c.MaxClaude = 4
		c.MaxWaitingPerBot = users
		c.MaxWait = 10 * time.Minute
	})
	h.claude.turn = turn
	for _, id := range bots {
		h.exchange(tokens[id], 1, "warm up")
	}
	var peak int
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
				peak = max(peak, runtime.NumGoroutine())
			}
		}
	}()
	waits := map[string][]time.Duration{}
	calls, start := 0, time.Now()
	for b.Loop() {
		logsBefore := h.logs.Len()
		summariesBefore := h.logs.FilterMessage("request").Len()
		sentBefore := map[string]int{}
		for _, id := range bots {
			sentBefore[id] = len(h.srv.Calls(tokens[id]))
			for u := range users {
				h.srv.SendText(tokens[id], int64(1000+u), int64(1000+u), "crowd")
			}
		}
		waitSummaries(b, h.logs, summariesBefore+len(bots)*users)
		for _, e := range h.logs.All()[logsBefore:] {
			f := e.ContextMap()
			if e.Message == "request" && f["outcome"] == "ok" {
				waits[f["bot"].(string)] = append(waits[f["bot"].(string)], time.Duration(f["queue_wait_ms"].(int64))*time.Millisecond)
			}
		}
		for _, id := range bots {
			calls += len(h.srv.Calls(tokens[id])) - sentBefore[id]
		}
	}
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	var p50s []float64
	for i, id := range bots {
		w := waits[id]
		if len(w) == 0 {
			b.Fatalf("no answered request of %s", id)
		}
		slices.Sort(w)
		p50 := float64(w[len(w)/2].Microseconds()) / 1000
		p50s = append(p50s, p50)
		b.ReportMetric(p50, fmt.Sprintf("bot%d-wait-p50-ms", i+1))
		b.ReportMetric(float64(w[len(w)*99/100].Microseconds())/1000, fmt.Sprintf("bot%d-wait-p99-ms", i+1))
	}
	b.ReportMetric(slices.Max(p50s)/slices.Min(p50s), "p50-slowest/fastest")
	b.ReportMetric(float64(calls)/elapsed.Seconds(), "telegram-calls/s")
	b.ReportMetric(float64(peak), "peak-goroutines")
	runtime.GC()
	if rss, ok := residentMB(); ok {
		b.ReportMetric(rss, "rss-MB")
	}
	b.ReportMetric(0, "ns/op")
}
