package bot

import (
	"brainbot/bot/store"
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
)

// benchHarness is a running bot with an instant fake Claude and 10,000
// stored sessions, as in production after a while.
func benchHarness(b *testing.B) *harness {
	h := newHarness(b, map[string]string{"alpha": brainFile(tokenA, "")}, func(c *Config) {
		c.QueueSize = 1000
		c.ChatActionEvery = time.Minute
	})
	ctx := context.Background()
	for u := int64(100_000); u < 110_000; u++ {
		if err := h.store.UseSession(ctx, store.Conversation{Bot: "alpha", Chat: u}, fmt.Sprintf("session-%d", u), time.Now()); err != nil {
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
		lat = append(lat, c.Time.Sub(queued[c.Param("text")]))
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
