// Command benchreport turns the output of `go test -bench` (the files
// named on the command line, as `make bench` writes them) into the
// Markdown report in docs/performance.md: one table per question, every
// number from the same run, and the machine it ran on.
package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	results, logs := map[string]map[string]float64{}, map[string]string{}
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		parse(f, results, logs)
		f.Close()
	}
	if len(results) == 0 {
		fmt.Fprintln(os.Stderr, "benchreport: no benchmark results in", os.Args[1:])
		os.Exit(1)
	}
	write(os.Stdout, results, logs, machine())
}

// benchLine matches "BenchmarkName-2   	 3	  411.0 unit	 1.85 unit ...".
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// logHeader matches "--- BENCH: BenchmarkName-2" (or "--- SKIP:"),
// followed by the benchmark's log lines: "    file_test.go:62: text".
var (
	logHeader = regexp.MustCompile(`^--- (?:BENCH|SKIP): (Benchmark\S+?)(?:-\d+)?$`)
	logLine   = regexp.MustCompile(`^\S+\.go:\d+: (.*)$`)
)

// parse reads benchmark lines: name → unit → value, and the first line
// each benchmark logged: name → line (why one skipped). A package's name
// is not kept: benchmark names are unique across the project.
func parse(r io.Reader, into map[string]map[string]float64, logs map[string]string) {
	lines := bufio.NewScanner(r)
	logging := ""
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if m := logHeader.FindStringSubmatch(line); m != nil {
			logging = m[1]
			continue
		}
		if m := logLine.FindStringSubmatch(line); m != nil && logging != "" {
			if _, ok := logs[logging]; !ok {
				logs[logging] = m[1]
			}
			continue
		}
		logging = ""
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fields := strings.Fields(m[2])
		values := map[string]float64{}
		for i := 0; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				values[fields[i+1]] = v
			}
		}
		into[m[1]] = values
	}
}

// cell formats one metric, or a dash when the benchmark did not run.
type cell struct {
	bench, unit string
	scale       float64 // multiply by this (e.g. ns → ms)
	format      string
}

func (c cell) render(results map[string]map[string]float64) string {
	v, ok := results[c.bench][c.unit]
	if !ok {
		return "—"
	}
	scale := c.scale
	if scale == 0 {
		scale = 1
	}
	format := c.format
	if format == "" {
		format = "%.1f"
	}
	return fmt.Sprintf(format, v*scale)
}

// pair renders two cells as "a / b".
func (c cell) pair(other cell, results map[string]map[string]float64) string {
	return c.render(results) + " / " + other.render(results)
}

func ms(bench, metric string) cell { return cell{bench: bench, unit: metric + "-ms"} }

func table(w io.Writer, results map[string]map[string]float64, header []string, rows [][]any) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, row := range rows {
		var cells []string
		for _, c := range row {
			switch c := c.(type) {
			case string:
				cells = append(cells, c)
			case cell:
				cells = append(cells, c.render(results))
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
}

func write(w io.Writer, r map[string]map[string]float64, logs map[string]string, machine string) {
	fmt.Fprintf(w, `# Performance

Produced by `+"`make bench`"+` (medians; all numbers from one run). Regenerate with
`+"`make bench`"+`; it rewrites this file. On a shared 2-core VM repeated runs
differ by up to ~20%%: compare numbers within one report, not across reports.

%s

The model is a scripted stand-in that answers at once, so the times below are
everything *but* the model: Telegram (a stand-in on loopback), brainbot, the
real Claude Code CLI 2.1.328, our MCP tools and an OpenAI stand-in.

## One message, end to end (ms)

From the update reaching the Bot API to the reply delivered. *First action* is
the typing/recording/uploading indicator the user sees; *CLI start* is spawn to
the CLI's `+"`system/init`"+`; *ours* is the total less the CLI process and the
Telegram upload: queueing, journaling, locating, organising, our own code.

`, machine)
	var rows [][]any
	for _, kind := range []string{"text", "speech", "image"} {
		b := "BenchmarkRequest/" + kind
		rows = append(rows, []any{kind, ms(b, "first-action"), ms(b, "total"), ms(b, "cli-startup"),
			ms(b, "turn1"), ms(b, "turn2"), ms(b, "locate"), ms(b, "telegram-send"), ms(b, "ours")})
	}
	table(w, r, []string{"request", "first action", "total", "CLI start", "turn 1", "turn 2 (tool)", "locate + organise", "Telegram send", "ours"}, rows)

	fmt.Fprint(w, `## Against the original system's way (ms)

The same request through the driver alone, without Telegram. *Baseline* does
what the earlier JavaScript system did: the CLI with every built-in tool and
permissions skipped, and the file found by listing and stat-ing a flat output
folder that is never cleaned (10,000 stale files here). Both spawn one CLI per
message. Ours: `+"`--bare`"+` (as with an API key), no built-in tools, our two MCP
tools served by brainbot over HTTP (only the call turn two asks for is served),
and the file taken from the tool's reported path after checking it.

`)
	rows = nil
	for _, kind := range []string{"text", "speech", "image"} {
		o, b := "BenchmarkDriver/ours/"+kind, "BenchmarkDriver/baseline/"+kind
		rows = append(rows, []any{kind, ms(o, "total"), ms(b, "total"), ms(o, "cli-startup"), ms(b, "cli-startup"),
			cell{bench: o, unit: "locate-ms", format: "%.2f"}, cell{bench: b, unit: "locate-ms", format: "%.2f"}})
	}
	table(w, r, []string{"request", "total, ours", "total, baseline", "CLI start, ours", "CLI start, baseline", "locate, ours", "locate, baseline"}, rows)

	fmt.Fprint(w, `## Voice at a model's pace (ms)

The one section where the stand-ins take a real service's time: the model
0.5 s to its first token, then about 250 characters a second; OpenAI speech
0.3 s + 2.5 ms a character (settings of the test stand-ins). The same answer
goes out as text and as a voice note, in warm conversations: from the
message to the answer reaching Telegram (`+"`BenchmarkVoicePace`"+`). *Old
way* is `+"`BRAINBOT_SPEECH_EARLY=off`"+`: the text spoken in turn two's tool
call, which first makes the model write it all again as the call's argument,
and the note sent after the model's closing words.

The floor of voice − text is turn two's round trip: once the model's last
word is in, the driver asks for the tool call (the model's first token, 0.5 s
here, and a short call), the tool joins the parts and writes the file, and
the note is uploaded. The speech itself is off that path but for the last
part, cut small (a sentence group of about 160 characters or more) so that
it is spoken in less time than that round trip.

`)
	voice := func(n, unit, format string) cell {
		return cell{bench: "BenchmarkVoicePace", unit: n + "-" + unit, format: format}
	}
	table(w, r, []string{"answer", "text arrives", "voice note arrives", "voice − text", "old way: note arrives", "old way: voice − text", "old / new (voice − text)"}, [][]any{
		{"8 sentences, ~800 characters", voice("short", "text-ms", "%.0f"), voice("short", "voice-ms", "%.0f"), voice("short", "voice-minus-text-ms", "%.0f"),
			voice("short", "old-voice-ms", "%.0f"), voice("short", "old-minus-text-ms", "%.0f"), voice("short", "old/new", "%.1f")},
		{"30 sentences, ~3,000 characters", voice("long", "text-ms", "%.0f"), voice("long", "voice-ms", "%.0f"), voice("long", "voice-minus-text-ms", "%.0f"),
			voice("long", "old-voice-ms", "%.0f"), voice("long", "old-minus-text-ms", "%.0f"), voice("long", "old/new", "%.1f")},
	})

	fmt.Fprint(w, "## Our own code\n\n")
	table(w, r, []string{"measure", "value", "target"}, [][]any{
		{"bot overhead per message, fake CLI answering at once: p50 (ms)", cell{bench: "BenchmarkOverhead", unit: "p50-ms", format: "%.2f"}, "≤ 5"},
		{"bot overhead per message: p99 (ms)", cell{bench: "BenchmarkOverhead", unit: "p99-ms", format: "%.2f"}, ""},
		{"200 users at once: messages per second", cell{bench: "BenchmarkConcurrentUsers", unit: "msgs/s", format: "%.0f"}, ""},
		{"driver overhead: spawn a trivial fake CLI to result (ms)", cell{bench: "BenchmarkDriverOverhead", unit: "ns/op", scale: 1e-6, format: "%.2f"}, ""},
		{"stream-json parsing: one request's CLI output (ms, one core)", cell{bench: "BenchmarkParse", unit: "ms/request", format: "%.2f"}, "≤ 1"},
		{"locate a file among 10,000 others (ms)", cell{bench: "BenchmarkLocate", unit: "ns/op", scale: 1e-6, format: "%.2f"}, "≤ 5"},
	})

	fmt.Fprint(w, `## Warm conversations and streamed text

A conversation's next message through the real CLI and the scripted model
(which answers at once), in one run: *cold* starts a CLI that resumes the
session, as every message did before warm processes; *warm* writes it into
the process kept from the conversation's last message. *First text* is a
long answer the model writes at a fixed rate (a 64-byte delta every 50 ms):
from its first delta to brainbot holding the first text, which the streamer
shows at once.

`)
	table(w, r, []string{"measure", "value", "target"}, [][]any{
		{"follow-up, cold: p50 / p99 (ms)", cell{bench: "BenchmarkFollowUp", unit: "cold-p50-ms", format: "%.0f"}.pair(cell{bench: "BenchmarkFollowUp", unit: "cold-p99-ms", format: "%.0f"}, r), ""},
		{"follow-up, warm: p50 / p99 (ms)", cell{bench: "BenchmarkFollowUp", unit: "warm-p50-ms", format: "%.0f"}.pair(cell{bench: "BenchmarkFollowUp", unit: "warm-p99-ms", format: "%.0f"}, r), "p50 ≤ 50"},
		{"cold p50 / warm p50", cell{bench: "BenchmarkFollowUp", unit: "cold/warm", format: "%.1f"}, "≥ 8"},
		{"first streamed text after the model's first token (ms, p50)", cell{bench: "BenchmarkFirstText", unit: "first-text-p50-ms", format: "%.1f"}, "≤ 300"},
		{"RSS of one warm CLI, 16 kept (MB, mean)", cell{bench: "BenchmarkWarmMemory", unit: "rss-per-warm-MB", format: "%.0f"}, ""},
		{"RSS of the 16 warm CLIs together (MB)", cell{bench: "BenchmarkWarmMemory", unit: "rss-16-warm-MB", format: "%.0f"}, ""},
		{"kept warm after 17 conversations with BRAINBOT_MAX_WARM=16 (least recently used ended)", cell{bench: "BenchmarkWarmMemory", unit: "warm-kept-of-17", format: "%.0f"}, "16"},
		{"one warm CLI's RSS after turn 1 / turn 50 (MB)", cell{bench: "BenchmarkWarmMemory", unit: "rss-turn-1-MB", format: "%.0f"}.pair(cell{bench: "BenchmarkWarmMemory", unit: "rss-turn-50-MB", format: "%.0f"}, r), ""},
	})

	fmt.Fprint(w, `## New conversations and panels: spares

A new conversation's first message, and a panel's turns, with the CLIs
started ahead of them (spares, `+"`BRAINBOT_SPARES`"+`, the default) and with
spares off, in one run each. *Through the product*: from the message
reaching the Bot API stand-in to the model receiving its request; each
message comes once the CLIs are quiet (`+"`BenchmarkFirstMessage`"+`). *Driver*: from
the driver's Run to the model's request (`+"`BenchmarkNewConversation`"+`). The demo
panel (three members that speak) runs from the /panel message to its last
message sent (`+"`BenchmarkDemoPanel`"+`); *its Claude turns* are the panel's eight
requests through the driver alone (`+"`BenchmarkPanelTurns`"+`).

`)
	pair := func(bench, a, b string) string {
		return cell{bench: bench, unit: a, format: "%.0f"}.pair(cell{bench: bench, unit: b, format: "%.0f"}, r)
	}
	table(w, r, []string{"measure", "with spares", "spares off", "target"}, [][]any{
		{"new conversation, through the product: p50 / p99 (ms)", pair("BenchmarkFirstMessage", "spares-p50-ms", "spares-p99-ms"),
			pair("BenchmarkFirstMessage", "cold-p50-ms", "cold-p99-ms"), "p50 ≤ 100"},
		{"new conversation, driver: p50 / p99 (ms)", pair("BenchmarkNewConversation", "spares-p50-ms", "spares-p99-ms"),
			pair("BenchmarkNewConversation", "cold-p50-ms", "cold-p99-ms"), ""},
		{"demo panel, /panel to its last message: p50 (ms)", cell{bench: "BenchmarkDemoPanel", unit: "spares-p50-ms", format: "%.0f"},
			cell{bench: "BenchmarkDemoPanel", unit: "cold-p50-ms", format: "%.0f"}, "≤ 2500"},
		{"the demo panel's Claude turns, driver: p50 (ms)", cell{bench: "BenchmarkPanelTurns", unit: "spares-p50-ms", format: "%.0f"},
			cell{bench: "BenchmarkPanelTurns", unit: "cold-p50-ms", format: "%.0f"}, ""},
		{"RSS of one spare, through the product / driver (MB)", cell{bench: "BenchmarkFirstMessage", unit: "spare-rss-MB", format: "%.0f"}.pair(
			cell{bench: "BenchmarkNewConversation", unit: "spare-rss-MB", format: "%.0f"}, r), "", ""},
	})
	fmt.Fprint(w, `**Spares yield to real work.** No spare starts while a request waits for a
Claude slot, or a request's CLI is starting, or threads waited for a CPU
more than a fifth of the time since the last look (brainbot's cgroup's
`+"`cpu.pressure`"+` where cgroup v2 keeps one, which counts a quota's
throttling, else `+"`/proc/pressure/cpu`"+`; where the kernel keeps no such
count, more threads runnable than brainbot's CPUs in `+"`/proc/loadavg`"+`):
however long while requests of ours run; a machine kept
busy by other work still starts them after 10 s. Spare CLIs run
at nice +10 (`+"`reaper.StartLow`"+`: started from a thread of that nice, so the
CLI's threads and MCP servers inherit it). Measured on a 2-CPU machine, one
CLI start (`+"`claude --help`"+`, p50 of 8): 360 ms alone, 870 ms with two other
starts at nice 0, 370 ms with them at nice +10. A spare taken for a
conversation, or one a new conversation waits for, is raised back to
brainbot's nice in the background, within its `+"`RLIMIT_NICE`"+` (the systemd
unit sets `+"`LimitNICE=+0`"+`). Spares count with the warm CLIs in one
budget, the memory in use and `+"`BRAINBOT_MAX_WARM`"+`, the kept CLIs worth
least ended first; `+"`BRAINBOT_SPARES_MEMORY`"+` may cap their memory besides
(unset by default; 25% of the memory was the default before, 2 spares on
a 1.9 GiB server where 7 bots would have kept 7), and `+"`brainbot doctor`"+`
says which bounds them. The demo panel's run allows its twelve spares the
whole memory.

`)

	fmt.Fprint(w, `## Spares on and off under saturation

12 users talk at once to two bots through one brainbot with 4 Claude slots
(`+"`BRAINBOT_MAX_CLAUDE=4`"+`, `+"`BRAINBOT_MAX_WARM=16`"+`), the real CLI and the scripted
model: each holds two conversations of three messages, one after the other,
each message sent once the last was answered, so that CLIs keep starting for
new conversations while requests wait for a slot (`+"`BenchmarkSparesSaturated`"+`).
An answer's time runs from the update reaching the Bot API stand-in to
brainbot's summary line of it. The load runs four times, spares off, on, on,
off, and each mode's answers are pooled: on a shared machine the others'
load drifts, and a mode measured once lost up to 1.9 times by its turn
alone. *Spares started* and *taken* count both runs' during the load (each
run has one a bot ready before it, taken by its first new conversations).

`)
	sat := func(unit, format string) cell {
		return cell{bench: "BenchmarkSparesSaturated", unit: unit, format: format}
	}
	table(w, r, []string{"measure", "spares on", "spares off", "target"}, [][]any{
		{"answer time: p50 / p99 (ms)", pair("BenchmarkSparesSaturated", "spares-on-p50-ms", "spares-on-p99-ms"),
			pair("BenchmarkSparesSaturated", "spares-off-p50-ms", "spares-off-p99-ms"), "on no worse than off"},
		{"spares started / taken during the load", pair("BenchmarkSparesSaturated", "spares-on-started", "spares-on-taken"),
			pair("BenchmarkSparesSaturated", "spares-off-started", "spares-off-taken"), ""},
	})
	table(w, r, []string{"measure", "value", "target"}, [][]any{
		{"answer time, spares on / off: p50", sat("on/off-p50", "%.2f"), "≤ 1"},
		{"answer time, spares on / off: p99", sat("on/off-p99", "%.2f"), "≤ 1"},
	})

	fmt.Fprint(w, `## A crowd: more conversations than Claude slots

3 bots x 200 users send one message each at once, bot after bot, to 4 Claude
slots and a fake CLI taking 20 ms a turn (`+"`BenchmarkCrowd`"+`). Slots go to the
bots in turn, so the last bot's users do not wait for all 400 messages before
theirs. Queue wait is the summary line's `+"`queue_wait`"+`: arrival to a Claude slot.

`)
	crowd := func(unit, format string) cell { return cell{bench: "BenchmarkCrowd", unit: unit, format: format} }
	table(w, r, []string{"measure", "bot 1", "bot 2", "bot 3", "target"}, [][]any{
		{"queue wait p50 (ms)", crowd("bot1-wait-p50-ms", "%.0f"), crowd("bot2-wait-p50-ms", "%.0f"), crowd("bot3-wait-p50-ms", "%.0f"), ""},
		{"queue wait p99 (ms)", crowd("bot1-wait-p99-ms", "%.0f"), crowd("bot2-wait-p99-ms", "%.0f"), crowd("bot3-wait-p99-ms", "%.0f"), ""},
	})
	table(w, r, []string{"measure", "value", "target"}, [][]any{
		{"slowest bot's p50 wait / fastest bot's", crowd("p50-slowest/fastest", "%.2f"), "≤ 2"},
		{"Telegram calls per second (replies, chat actions)", crowd("telegram-calls/s", "%.0f"), ""},
		{"peak goroutines (test process, stand-ins included)", crowd("peak-goroutines", "%.0f"), ""},
		{"RSS after the crowd (MB, test process)", crowd("rss-MB", "%.1f"), ""},
	})

	fmt.Fprint(w, `## Many machines: instances sharing the bots through NATS

The same load on 1, 2 and 3 `+"`brainbot run`"+` processes sharing two bots through one
NATS JetStream server (docs/scaling.md), each with 4 Claude slots, against a
fake CLI taking 200 ms a turn: 50 users send 6 messages each, each after the
answer to the last (`+"`BenchmarkClusterScaling`"+`). Latency runs from the
update reaching the Bot API stand-in to the answer; all processes share this
machine's cores. Failover: 30 users keep talking to 3 instances (a
message always in flight) and 30 more said one thing; one instance is
killed with SIGKILL and the quiet users write again at once: the time from
the kill to the next answer in each of its conversations. Handover: the
same talk, one instance stopped with SIGTERM: its conversations' longest
wait between two answers around the stop, against the usual wait before
and after it (two instances have fewer Claude slots than three). NATS
back: the same talk, the nats-server stopped for 10 s: the time from its
restart to the first answer and to each conversation's next one.

`)
	scale := func(n, unit, format string) cell {
		return cell{bench: "BenchmarkClusterScaling/instances-" + n, unit: unit, format: format}
	}
	table(w, r, []string{"instances", "messages/s", "p50 latency (ms)", "p99 latency (ms)"}, [][]any{
		{"1", scale("1", "msgs/s", "%.1f"), scale("1", "p50-ms", "%.0f"), scale("1", "p99-ms", "%.0f")},
		{"2", scale("2", "msgs/s", "%.1f"), scale("2", "p50-ms", "%.0f"), scale("2", "p99-ms", "%.0f")},
		{"3", scale("3", "msgs/s", "%.1f"), scale("3", "p50-ms", "%.0f"), scale("3", "p99-ms", "%.0f")},
	})
	outage := func(bench, unit string) cell {
		return cell{bench: "BenchmarkClusterScaling/" + bench, unit: unit, format: "%.0f"}
	}
	table(w, r, []string{"measure", "value", "target"}, [][]any{
		{"conversations on the killed instance", outage("failover", "conversations"), ""},
		{"kill to the answer of a message in flight: p50 / p99 (ms)", pair("BenchmarkClusterScaling/"+"failover", "inflight-p50-ms", "inflight-p99-ms"), "p99 ≤ 10000"},
		{"kill to the answer of a message sent after it: p50 / p99 (ms)", pair("BenchmarkClusterScaling/"+"failover", "afterkill-p50-ms", "afterkill-p99-ms"), "p99 ≤ 5000"},
		{"SIGTERM: longest wait between two answers, p50 / p99 (ms)", pair("BenchmarkClusterScaling/"+"handover", "stop-gap-p50-ms", "stop-gap-p99-ms"), "wait after + 1000"},
		{"usual wait between two answers before / after the stop, p50 (ms)", pair("BenchmarkClusterScaling/"+"handover", "usual-gap-p50-ms", "after-gap-p50-ms"), ""},
		{"NATS back after 10 s: first answer / each conversation's next, p99 (ms)", pair("BenchmarkClusterScaling/"+"nats-back", "first-answer-ms", "next-answer-p99-ms"), ""},
		{"error replies during the NATS outage", outage("nats-back", "error-replies"), "0"},
	})

	killAndOutage(w, r)
	smallServer(w, r, logs)

	fmt.Fprint(w, "## Memory (MB resident)\n\n")
	table(w, r, []string{"process", "RSS", "target"}, [][]any{
		{"brainbot idle, 5 bots", cell{bench: "BenchmarkMemory/brainbot-idle", unit: "rss-MB"}, ""},
		{"brainbot with 10,000 stored sessions", cell{bench: "BenchmarkMemory/brainbot-10k-sessions", unit: "rss-MB"}, "≤ 60"},
		{"one Claude CLI process while it answers", cell{bench: "BenchmarkMemory/claude-process", unit: "cli-rss-MB"}, ""},
	})
}

// killAndOutage is the section of the cluster under load: issue 38's run.
func killAndOutage(w io.Writer, r map[string]map[string]float64) {
	fmt.Fprint(w, `## A cluster under load: a kill and an outage

Three `+"`brainbot run`"+` processes share two bots through one nats-server, every
turn through the real Claude CLI and the scripted model, each instance with
4 Claude slots and its spares (`+"`BenchmarkClusterScaling/kill-and-outage`"+`).
30 users hold 5-message conversations, each message sent 0 to 4.5 s after
the answer to the last. The instance started first (it polls both bots) is
killed with SIGKILL a third of the way in, at a moment it has messages in
flight; the nats-server stops for 10 s two thirds of the way in, once the
failover is over, so that it is measured apart from the outage. *In
flight*: from the kill to the answer of each message the killed instance
held unanswered. *Sent after the kill*: from sending to answer, the first
message after the kill in each of its conversations that had none in
flight. *Meanwhile*: from sending to answer, every message of the other
conversations sent while those were: what the machine gave anyone then.
*The floor* (`+"`BenchmarkResumeBurst`"+`): ten conversations, each resumed by a
CLI started for it at once, on this machine with nothing else running: a
failover that moves ten conversations cannot answer the last sooner here.
The survivors find the killed instance by its closed connection
to NATS (in half a second), take its partitions and bots at once, and
start the CLIs of its recent conversations below the priority of real
work; a message that waits for its conversation raises its CLI. All three
instances share this machine's cores, so a CLI that resumes a moved
conversation starts as slowly as the machine is busy. A
turn is lost when the model's request lacks one of the conversation's
earlier turns (the scripted reply says how many it saw); a reply sent
twice is counted, and fails the run but for the one no system can avoid
without an idempotent `+"`sendMessage`"+`: Telegram had it from the killed
instance in the instant of the kill, before the instance could mark it
answered. A bot's Claude slots serve its oldest message first (by when
the update reached the cluster), so a message redelivered after the kill
does not queue again behind the taking instance's own backlog.

`)
	b := "BenchmarkClusterScaling/kill-and-outage"
	n := func(unit string) cell { return cell{bench: b, unit: unit, format: "%.0f"} }
	burst := func(unit string) cell { return cell{bench: "BenchmarkResumeBurst", unit: unit, format: "%.0f"} }
	trio := func(metric string) string {
		return n(metric+"-p50-ms").render(r) + " / " + n(metric+"-p99-ms").render(r) + " / " + n(metric+"-max-ms").render(r)
	}
	table(w, r, []string{"measure", "value", "target"}, [][]any{
		{"conversations on the killed instance / messages in flight there", n("conversations").pair(n("inflight"), r), ""},
		{"kill to the answer of a message in flight: p50 / p99 / max (ms)", trio("inflight"), "max ≤ 10000"},
		{"a message sent after the kill, to its answer: p50 / p99 / max (ms)", trio("afterkill"), "max ≤ 5000"},
		{"meanwhile, a message of a conversation not moved: p50 / max (ms)", n("others-p50-ms").pair(n("others-max-ms"), r), ""},
		{"the floor here: ten conversations resumed at once on the idle machine, to each answer p50 / to the last, p50 (ms)",
			burst("each-p50-ms").pair(burst("last-p50-ms"), r), ""},
		{"CPU of a resume and its first turn (CPU-s)", cell{bench: "BenchmarkResumeBurst", unit: "cpu-s/resume", format: "%.2f"}, ""},
		{"every message, sent to answered: p50 / p99 (ms)", n("answer-p50-ms").pair(n("answer-p99-ms"), r), ""},
		{"turns lost", n("turns-lost"), "0"},
		{"replies sent twice", n("replies-twice"), "0 (or the one of the kill)"},
		{"error replies", n("error-replies"), "0"},
	})
}

// smallServer is the section of issue 48's load on a small server and on
// the whole machine: a row for each run there was, or why none ran.
func smallServer(w io.Writer, r map[string]map[string]float64, logs map[string]string) {
	fmt.Fprint(w, `## A small server: 1 CPU and 2 GB

Most Telegram bots live on one virtual CPU and 1-2 GB of memory. brainbot
runs as a process in a cgroup of 1 CPU (a CPU quota) and 2 GB (a memory
limit; cgroup v2 where the machine has it, v1 else), its CLIs with it:
three bots (text, voice, pictures), the real CLI, and the model at the
pace of issue 48's measurement: 0.5 s to its first token, then its stream
and OpenAI's answers at once. Each user
writes to one bot: a first message within the first 25 s, then each next
one a pause after the answer to the last (exponential, 8 s on average;
seeded, the same in every run). The same load runs on the whole machine,
in a cgroup without limits that only measures (`+"`BenchmarkSmallServer`"+`;
it needs root, and says why it skipped otherwise).
An answer's time runs from the update reaching the Bot API stand-in to
the answer delivered to it, as the user meets it: the text, the voice
note, the picture (a note or a picture goes out once the tool made it,
while the model still writes its closing words). *Warm / spare / cold*: the answers that
came from a process kept from the conversation's last message, from a
spare, or from a CLI started for them; *not ok*: answered otherwise
(busy, an error); *unanswered*: no answer within 180 s. *CPU-s a
message* is the cgroup's CPU during the load over the messages; *peak*
its most memory, brainbot's start included; *OOM kills* the processes
the kernel ended for memory; *users' means* each user's mean answer time,
the median user's and the slowest's; *load / its pauses*: how long the
load took, and how long it would have with every answer instant (the
longest a user took arriving and pausing). One load alone, as root with the
`+"`make test`"+` environment:
`+"`BENCH_SMALL_USERS=12 BENCH_SMALL_MESSAGES=4 go test -run '^$' -bench 'SmallServer/1cpu-2gb' -benchtime 1x ./cmd/brainbot`"+`;
another budget with `+"`BENCH_SMALL_ENV=BRAINBOT_MAX_WARM=8`"+`, other boxes
with `+"`BENCH_SMALL_BOXES=1cpu-1gb,2cpu-4gb`"+`.

`)
	type run struct {
		box   string
		users int
		name  string
	}
	var runs []run
	for name := range r {
		rest, ok := strings.CutPrefix(name, "BenchmarkSmallServer/")
		box, users, ok2 := strings.Cut(rest, "/users-")
		n, err := strconv.Atoi(users)
		if ok && ok2 && err == nil {
			runs = append(runs, run{box, n, name})
		}
	}
	if len(runs) == 0 {
		why := "not run"
		if _, skipped := r["BenchmarkSmallServer"]["skipped"]; skipped {
			why = logs["BenchmarkSmallServer"]
		}
		fmt.Fprintf(w, "Skipped in this run: %s.\n\n", strings.TrimSuffix(why, "."))
		return
	}
	slices.SortFunc(runs, func(a, b run) int { return cmp.Or(cmp.Compare(a.users, b.users), cmp.Compare(b.box, a.box)) })
	var rows [][]any
	for _, x := range runs {
		c := func(unit, format string) cell { return cell{bench: x.name, unit: unit, format: format} }
		pn := func(kind string) string { return c(kind+"-p50-ms", "%.0f").pair(c(kind+"-p90-ms", "%.0f"), r) }
		rows = append(rows, []any{fmt.Sprintf("%d users, %s", x.users, x.box), pn("text"), pn("voice"), pn("pictures"),
			c("first-p50-ms", "%.0f"), c("warm", "%.0f").render(r) + " / " + c("spare", "%.0f").render(r) + " / " + c("cold", "%.0f").render(r),
			c("user-mean-p50-ms", "%.0f").pair(c("user-mean-max-ms", "%.0f"), r),
			c("not-ok", "%.0f").pair(c("unanswered", "%.0f"), r), c("elapsed-s", "%.0f").pair(c("pauses-s", "%.0f"), r), c("msgs/s", "%.2f"), c("cpu-s/msg", "%.2f"), c("peak-MB", "%.0f"), c("oom-kills", "%.0f")})
	}
	table(w, r, []string{"load, box", "text p50 / p90 (ms)", "voice p50 / p90 (ms)", "pictures p50 / p90 (ms)", "first message p50 (ms)",
		"warm / spare / cold", "users' means: median / slowest (ms)", "not ok / unanswered", "load / its pauses (s)", "messages/s", "CPU-s a message", "peak (MB)", "OOM kills"}, rows)
	fmt.Fprint(w, `Goals (issue 48): 12 users on 1 CPU / 2 GB, each kind's p50 at most 1.3
times the whole machine's, text ≤ 1,000 ms, voice and pictures ≤ 1,600 ms,
a first message ≤ 2,000 ms; 36 users, every message answered at 1.4 a
second or more, no OOM kill, peak ≤ 1,843 MB (90% of the limit).

`)
}

// machine describes where the numbers were measured.
func machine() string {
	cpu := "unknown CPU"
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(info), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	mem := ""
	if info, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(info), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
			}
		}
	}
	kernel := ""
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		kernel = ", " + strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("Measured %s on %s (%d cores%s%s), %s.",
		time.Now().UTC().Format("2006-01-02"), cpu, runtime.NumCPU(), mem, kernel, runtime.Version())
}
