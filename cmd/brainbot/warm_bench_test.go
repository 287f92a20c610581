package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"brainbot/claude"
	"brainbot/claude/claudetest"
	"brainbot/mcp/toolstest"
)

// warmDriver is a driver as production runs it (--bare, warm processes)
// against the scripted model, in its own folders; home is its CLIs' HOME.
func warmDriver(b *testing.B, model *claudetest.Model, warm claude.WarmConfig) (d *claude.Driver, dir string) {
	dir = b.TempDir()
	data := filepath.Join(dir, "data")
	tools := toolstest.Start(b, data, nil)
	d, err := claude.New(claude.Config{Command: claudetest.RequireCLI(b), DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets,
		Env: append(model.Env(), "HOME="+filepath.Join(dir, "home")), Bare: true, Warm: warm})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	return d, dir
}

func textRequest(conversation, session string, resume bool, prompt string) claude.Request {
	return claude.Request{Mode: claude.Text, Prompt: prompt, SessionID: session, Resume: resume, Conversation: conversation,
		SystemPrompt: "Be brief.", BotID: "bench"}
}

// BenchmarkFollowUp: a conversation's next message through the real CLI,
// cold (a new process resuming the session, as without warm processes)
// against warm (written into the process kept from the last message), in
// one run with the same scripted model, which answers at once: the times
// are brainbot's and the CLI's overhead alone. Target: warm p50 <= 50 ms
// and at least 8 times less than cold.
func BenchmarkFollowUp(b *testing.B) {
	model := claudetest.NewModel()
	defer model.Close()
	d, _ := warmDriver(b, model, claude.WarmConfig{Max: 4})
	ctx := context.Background()
	session := uuid.NewString()
	res, err := d.Run(ctx, textRequest("", session, false, "hello"))
	if err != nil {
		b.Fatal(err)
	}
	session = res.SessionID
	var cold, warm []float64
	for i := 0; i < b.N; i++ {
		// Cold: no conversation key, so a process of its own.
		start := time.Now()
		if _, err := d.Run(ctx, textRequest("", session, true, fmt.Sprint("cold ", i))); err != nil {
			b.Fatal(err)
		}
		cold = append(cold, ms(time.Since(start)))
	}
	// Warm: the first message starts the process, the others reuse it.
	if _, err := d.Run(ctx, textRequest("bench/1", session, true, "start")); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := d.Run(ctx, textRequest("bench/1", session, true, fmt.Sprint("warm ", i)))
		if err != nil || !res.Warm {
			b.Fatalf("warm follow-up: warm %v, %v", res != nil && res.Warm, err)
		}
		warm = append(warm, ms(time.Since(start)))
	}
	slices.Sort(cold)
	slices.Sort(warm)
	b.ReportMetric(cold[len(cold)/2], "cold-p50-ms")
	b.ReportMetric(cold[len(cold)*99/100], "cold-p99-ms")
	b.ReportMetric(warm[len(warm)/2], "warm-p50-ms")
	b.ReportMetric(warm[len(warm)*99/100], "warm-p99-ms")
	b.ReportMetric(cold[len(cold)/2]/warm[len(warm)/2], "cold/warm")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkResumeBurst: ten conversations resumed at once, each in a
// process started for it, as the instance that takes a killed one's
// conversations starts them when their messages come: from the burst to
// each answer and to the last, and the CPU a resume and its first turn
// cost. The scripted model answers at once, so the times are the CLIs'
// starts on this machine's cores alone: the floor of a failover that
// moves ten conversations here, before any other work shares the cores.
func BenchmarkResumeBurst(b *testing.B) {
	const burst = 10
	model := claudetest.NewModel()
	defer model.Close()
	d, _ := warmDriver(b, model, claude.WarmConfig{Max: burst})
	ctx := context.Background()
	sessions := make([]string, burst)
	for i := range sessions {
		res, err := d.Run(ctx, textRequest("", uuid.NewString(), false, "hello"))
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = res.SessionID
	}
	var each, last []time.Duration
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		before := childrenCPU(b)
		start := time.Now()
		took := make([]time.Duration, burst)
		var resumes sync.WaitGroup
		for k, session := range sessions {
			resumes.Go(func() {
				// No conversation key: a process of its own, ended after.
				if _, err := d.Run(ctx, textRequest("", session, true, fmt.Sprint("again ", i))); err != nil {
					b.Error(err)
				}
				took[k] = time.Since(start)
			})
		}
		resumes.Wait()
		each = append(each, took...)
		last = append(last, slices.Max(took))
		cpu += childrenCPU(b) - before
	}
	b.ReportMetric(pct(each, 50), "each-p50-ms")
	b.ReportMetric(pct(last, 50), "last-p50-ms")
	b.ReportMetric(cpu.Seconds()/float64(b.N*burst), "cpu-s/resume")
	b.ReportMetric(0, "ns/op")
}

// childrenCPU is the CPU time of this process's children that ended.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFirstText: a long answer the model writes at a fixed rate (a
// 64-byte delta every 50 ms), streamed through the real CLI: the time from
// the model's first delta to the driver handing brainbot the first text
// (what the streamer shows at once). Target: <= 300 ms.
func BenchmarkFirstText(b *testing.B) {
	model := claudetest.NewModel()
	defer model.Close()
	model.SetPace(50 * time.Millisecond)
	d, _ := warmDriver(b, model, claude.WarmConfig{Max: 4})
	var lags []float64
	for i := 0; i < b.N; i++ {
		var first time.Time
		req := textRequest("", uuid.NewString(), false, "tell me a story #long")
		req.OnText = func(string) {
			if first.IsZero() {
				first = time.Now()
			}
		}
		if _, err := d.Run(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		starts := model.StreamStarts()
		lags = append(lags, ms(first.Sub(starts[len(starts)-1])))
	}
	slices.Sort(lags)
	b.ReportMetric(lags[len(lags)/2], "first-text-p50-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWarmMemory: 16 conversations kept warm (the RSS of each CLI
// process), the pool's eviction past its maximum, and one process's RSS
// over 50 turns (growth is what recycling is for). It measures once,
// whatever -benchtime asks: 17 CLIs and 50 turns take a while.
func BenchmarkWarmMemory(b *testing.B) {
	model := claudetest.NewModel()
	defer model.Close()
	ctx := context.Background()
	{
		d, dir := warmDriver(b, model, claude.WarmConfig{Max: 16})
		for c := range 17 {
			if _, err := d.Run(ctx, textRequest(fmt.Sprint("bench/", c), uuid.NewString(), false, "hello")); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(time.Second) // the evicted one ends in the background
		pids := cliPIDs(dir)
		var total float64
		for _, pid := range pids {
			total += rssMBOrZero(pid)
		}
		b.ReportMetric(float64(d.Warm()), "warm-kept-of-17")
		b.ReportMetric(float64(len(pids)), "cli-processes")
		b.ReportMetric(total/float64(len(pids)), "rss-per-warm-MB")
		b.ReportMetric(total, "rss-16-warm-MB")
		d.Close()

		one, oneDir := warmDriver(b, model, claude.WarmConfig{Max: 1, RecycleAfter: 1000})
		session := uuid.NewString()
		for turn := 1; turn <= 50; turn++ {
			res, err := one.Run(ctx, textRequest("bench/one", session, turn > 1, fmt.Sprint("turn ", turn)))
			if err != nil {
				b.Fatal(err)
			}
			session = res.SessionID
			if turn == 1 || turn == 50 {
				pids := cliPIDs(oneDir)
				if len(pids) != 1 {
					b.Fatalf("%d CLI processes for one warm conversation", len(pids))
				}
				b.ReportMetric(rssMBOrZero(pids[0]), fmt.Sprintf("rss-turn-%d-MB", turn))
			}
		}
		one.Close()
	}
	b.ReportMetric(0, "ns/op")
}

// cliPIDs lists the Claude CLI processes whose HOME is in dir.
func cliPIDs(dir string) []int {
	var pids []int
	for _, p := range claudetest.ProcessesUnder(dir) {
		pids = append(pids, p.PID)
	}
	return pids
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
