package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// The small-server case of `make bench` (issue 48): most Telegram bots
// live on one virtual CPU and 1-2 GB. brainbot runs as a process inside
// a cgroup of 1 CPU and 2 GB (smallcgroup_bench_test.go), three bots
// (text, voice, pictures), the real CLI, and the model at the pace of
// the measurement, 0.5 s to its first token (its stream and
// OpenAI's answers come at once); users write a few messages each, a
// pause after each answer, as people do. The same load runs on the whole
// machine, in a cgroup without limits that only measures. It needs root
// to make the cgroups, and says so otherwise.
//
// Settings, for a quick look, another budget or the sizing table in
// docs/operations.md (docs/performance.md):
//
//	BENCH_SMALL_USERS=12,36   users of each run (one run a count)
//	BENCH_SMALL_MESSAGES=4    messages a user writes
//	BENCH_SMALL_BOXES=1cpu-2gb,whole  the boxes, <n>cpu-<m>gb or whole
//	BENCH_SMALL_ENV="BRAINBOT_MAX_WARM=8"  more of brainbot's environment
const (
	// smallPause is the mean pause of a user between an answer and their
	// next message (exponential); smallSpread the time over which users
	// write their first message (uniform); smallSeed seeds both.
	smallPause  = 8 * time.Second
	smallSpread = 25 * time.Second
	smallSeed   = 48
	// smallWait is how long a message may go unanswered before it counts
	// as unanswered and its user gives up.
	smallWait = 180 * time.Second
)

// smallBoxes are the boxes the load runs on by default: 1 CPU and 2 GB,
// and the whole machine (no limits).
const smallBoxes = "1cpu-2gb,whole"

// smallKinds are the three bots and what their users write.
var smallKinds = []struct{ kind, bot, brain, text string }{
	{"text", "narrator", narratorBrain, "tell me something"},
	{"voice", "speaker", speakerBrain, "tell me something"},
	{"pictures", "painter", painterBrain, "draw a boat"},
}

// BenchmarkSmallServer: per kind the answer time (the update queued at
// the Bot API stand-in to the answer delivered to it) p50, p90 and
// p95; a first message's p50; how many answers came warm, from a spare
// or from a CLI started for them; the CPU of the box per message; its
// peak memory; the CLIs the kernel killed for memory; and the messages
// unanswered or answered with an error.
func BenchmarkSmallServer(b *testing.B) {
	// Where no cgroup can be made the benchmark says why and reports
	// itself skipped: go test prints a b.Skip's reason only with -v,
	// and the report (cmd/internal/benchreport) shows this one.
	if why := cgroupsMissing(); why != "" {
		b.Log(why)
		b.ReportMetric(1, "skipped")
		b.ReportMetric(0, "ns/op")
		return
	}
	users, err := envInts("BENCH_SMALL_USERS", []int{12, 36})
	if err != nil {
		b.Fatal(err)
	}
	boxes, err := parseBoxes(cmp.Or(os.Getenv("BENCH_SMALL_BOXES"), smallBoxes))
	if err != nil {
		b.Fatal(err)
	}
	messages, err := envInts("BENCH_SMALL_MESSAGES", []int{4})
	if err != nil || len(messages) != 1 {
		b.Fatalf("BENCH_SMALL_MESSAGES: one count, not %v (%v)", messages, err)
	}
	for _, box := range boxes {
		for _, n := range users {
			b.Run(fmt.Sprintf("%s/users-%d", box.name, n), func(b *testing.B) {
				once(b, b.Name(), func() map[string]float64 { return smallServerRun(b, box, n, messages[0]) })
			})
		}
	}
}

// envInts reads a comma-separated list of counts, or def when unset.
func envInts(name string, def []int) ([]int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s=%q: counts, comma-separated", name, v)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseBoxes reads a comma-separated list of boxes: "whole", or
// "<n>cpu-<m>gb" (n CPUs of quota, m GiB of memory).
func parseBoxes(list string) ([]cgroupLimits, error) {
	var boxes []cgroupLimits
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		box := cgroupLimits{name: name}
		if name != "whole" {
			var cpus, gb int
			if _, err := fmt.Sscanf(name, "%dcpu-%dgb", &cpus, &gb); err != nil || cpus <= 0 || gb <= 0 || fmt.Sprintf("%dcpu-%dgb", cpus, gb) != name {
				return nil, fmt.Errorf("BENCH_SMALL_BOXES: %q is no box: whole, or <n>cpu-<m>gb like 1cpu-2gb", name)
			}
			box.cpus, box.memory = float64(cpus), int64(gb)<<30
		}
		boxes = append(boxes, box)
	}
	return boxes, nil
}

// smallAnswer is one message's fate.
type smallAnswer struct {
	kind     string
	user     int64
	first    bool
	took     time.Duration
	line     stack.Line
	answered bool
}

// smallServerRun runs brainbot in a cgroup of box's limits, puts the
// load of users through it, and returns the metrics.
func smallServerRun(b *testing.B, box cgroupLimits, users, messages int) map[string]float64 {
	cg := newBenchCgroup(b, box)
	brains := map[string]string{}
	for _, k := range smallKinds {
		brains[k.bot+".yaml"] = k.brain
	}
	env := append([]string{"BRAINBOT_GRACE=5s", "BRAINBOT_HTTP_ADDR=127.0.0.1:0"}, strings.Fields(os.Getenv("BENCH_SMALL_ENV"))...)
	s := startStack(b, stack.Config{
		Brainbot:  cg.wrap(b, brainbotBinary(b)),
		ClaudeCmd: claudetest.RequireCLI(b),
		Dir:       b.TempDir(),
		Brains:    brains,
		Env:       env,
		Logs:      testLogs(b),
	}, nil)
	// The goals are of a model 0.5 s to its first token and no
	// other pace: paceLikeReal's stream and speech would add their own
	// seconds to the whole machine's times and the small server's alike.
	s.Model.SetDelay(paceFirstToken)
	// A server that has run a while has its spares ready.
	if !slices.Contains(env, "BRAINBOT_SPARES=0") && !slices.Contains(env, "BRAINBOT_MAX_WARM=0") {
		waitMetrics(b, s, "spares started", func(get func(string) float64) bool {
			return get(`brainbot_claude_spares{state="ready"}`) >= 1 && get(`brainbot_claude_spares{state="starting"}`) == 0
		})
	}
	sparesBefore := metric(b, s, "brainbot_claude_spares_started_total")
	cpuBefore := cg.cpu(b)
	start := time.Now()
	answers, floor := smallLoad(b, s, users, messages)
	elapsed := time.Since(start)
	cpu := cg.cpu(b) - cpuBefore
	result := smallTally(answers)
	result["spares-started"] = metric(b, s, "brainbot_claude_spares_started_total") - sparesBefore
	result["cpu-s/msg"] = cpu.Seconds() / float64(len(answers))
	if peak, ok := cg.peak(b); ok {
		result["peak-MB"] = float64(peak >> 20)
	}
	result["oom-kills"] = float64(cg.oomKills(b))
	result["elapsed-s"] = elapsed.Seconds()
	result["msgs/s"] = float64(len(answers)) / elapsed.Seconds()
	result["pauses-s"] = floor.Seconds()
	b.Logf("%s, %d users x %d messages: %d answered in %v, peak %d MB, %.2f CPU-s a message",
		box.name, users, messages, int(result["answered"]), elapsed.Round(time.Second), int(result["peak-MB"]), result["cpu-s/msg"])
	stopStack(b, s) // its CLIs end with it: the cgroup can go
	return result
}

// smallLoad has each user write messages to their bot, the first within
// smallSpread, each next one a pause after the answer to the last, and
// returns every message's fate, and the floor of the load's time: the
// longest a user took arriving and pausing, which the load would take
// were every answer instant.
func smallLoad(b *testing.B, s *stack.Stack, users, messages int) ([]smallAnswer, time.Duration) {
	answered := followSummaries(b, s)
	defer answered.stop()
	var (
		mu    sync.Mutex
		out   []smallAnswer
		floor time.Duration
		wg    sync.WaitGroup
	)
	for u := range users {
		wg.Go(func() {
			k := smallKinds[u%len(smallKinds)]
			user := int64(70_000 + u)
			rng := rand.New(rand.NewPCG(smallSeed, uint64(u)))
			own := time.Duration(rng.Float64() * float64(smallSpread))
			time.Sleep(own) // the user arriving
			defer func() {
				mu.Lock()
				floor = max(floor, own)
				mu.Unlock()
			}()
			for m := range messages {
				if m > 0 {
					pause := time.Duration(rng.ExpFloat64() * float64(smallPause))
					own += pause
					time.Sleep(pause) // the user reading and writing
				}
				done := answered.expect(k.bot, user)
				sent := time.Now()
				s.Telegram.SendText(stack.Token(k.bot), user, user, fmt.Sprintf("%s (user %d, message %d)", k.text, user, m+1))
				a := smallAnswer{kind: k.kind, user: user, first: m == 0}
				select {
				case a.line = <-done:
					a.took, a.answered = delivered(s, stack.Token(k.bot), user, sent), true
				case <-time.After(smallWait):
				}
				mu.Lock()
				out = append(out, a)
				mu.Unlock()
				if !a.answered {
					return // a user who got no answer writes no more
				}
			}
		})
	}
	wg.Wait()
	return out, floor
}

// delivered is how long after sent the answer to user reached the Bot
// API stand-in, as the user meets it: the text's message, the voice
// note, the picture. A voice note or a picture goes out as soon as the
// tool made it, while the model still writes its closing words, which
// the request's summary line waits for. Called once that line is
// logged: where nothing was delivered (a "not ok" answer), the time to
// then.
func delivered(s *stack.Stack, token string, user int64, sent time.Time) time.Duration {
	chat := strconv.FormatInt(user, 10)
	for _, c := range s.Telegram.Sent(token) {
		if c.Time.After(sent) && c.Param("chat_id") == chat {
			return c.Time.Sub(sent)
		}
	}
	return time.Since(sent)
}

// smallTally turns the answers into the run's metrics.
func smallTally(answers []smallAnswer) map[string]float64 {
	result := map[string]float64{"messages": float64(len(answers))}
	byKind := map[string][]time.Duration{}
	var first []time.Duration
	for _, a := range answers {
		if !a.answered {
			result["unanswered"]++
			continue
		}
		result["answered"]++
		byKind[a.kind] = append(byKind[a.kind], a.took)
		if a.first {
			first = append(first, a.took)
		}
		switch {
		case a.line.Str("outcome") != "ok":
			result["not-ok"]++ // busy, error: the user got no real answer
		case a.line.Fields["warm"] == true:
			result["warm"]++
		case a.line.Fields["spare"] == true:
			result["spare"]++
		default:
			result["cold"]++
		}
	}
	for kind, d := range byKind {
		for _, p := range []int{50, 90, 95} {
			result[fmt.Sprintf("%s-p%d-ms", kind, p)] = pct(d, p)
		}
	}
	if len(first) > 0 {
		result["first-p50-ms"] = pct(first, 50)
	}
	if means := userMeans(answers); len(means) > 0 {
		result["user-mean-p50-ms"] = pct(means, 50)
		result["user-mean-max-ms"] = pct(means, 100)
	}
	for _, k := range []string{"unanswered", "not-ok", "warm", "spare", "cold"} {
		result[k] += 0 // reported even when none
	}
	return result
}

// userMeans is each user's mean answer time: whether some users wait
// much longer than the rest, which the percentiles of all answers hide.
func userMeans(answers []smallAnswer) []time.Duration {
	sum, count := map[int64]time.Duration{}, map[int64]int{}
	for _, a := range answers {
		if a.answered {
			sum[a.user] += a.took
			count[a.user]++
		}
	}
	var means []time.Duration
	for user, total := range sum {
		means = append(means, total/time.Duration(count[user]))
	}
	return means
}
