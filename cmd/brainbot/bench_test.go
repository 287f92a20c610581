package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"brainbot/claude"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/mcp/toolstest"
	"brainbot/message"
	"brainbot/output"
	"brainbot/state/sqlite"
	"brainbot/toolspec"
)

// Benchmarks of the whole product, for `make bench` and docs/performance.md.
// Each reports medians over b.N requests as custom metrics (ms); run them
// with -benchtime Nx.

// medians collects per-request samples and reports their medians.
type medians map[string][]float64

func (m medians) add(name string, d time.Duration) {
	m[name] = append(m[name], float64(d.Microseconds())/1000)
}

func (m medians) report(b *testing.B) {
	for name, v := range m {
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], name+"-ms")
	}
	b.ReportMetric(0, "ns/op") // wall time per op means nothing here: the metrics above do
}

func summaryDuration(l stack.Line, key string) time.Duration {
	return time.Duration(l.Float(key) * float64(time.Millisecond))
}

var benchRequests = []struct{ name, bot, text string }{
	{"text", "narrator", "tell me something"},
	{"speech", "speaker", "tell me something"},
	{"image", "painter", "draw a boat"},
}

// BenchmarkRequest: one user message through Telegram, brainbot, the real
// CLI and our MCP servers, to the reply in Telegram. The scripted model
// answers at once, so what is measured is everything but the model.
func BenchmarkRequest(b *testing.B) {
	s := newStack(b, nil)
	for _, r := range benchRequests {
		b.Run(r.name, func(b *testing.B) {
			m := medians{}
			for i := 0; i < b.N; i++ {
				user := int64(10_000 + i)
				mark := len(s.Telegram.Calls(stack.Token(r.bot)))
				reply := ask(b, s, r.bot, user, r.text)
				if len(reply.Calls) != 1 {
					b.Fatalf("%s: want one reply, got %v", r.name, reply.Methods())
				}
				sum := reply.Summary
				// First byte: the first Bot API call for this chat (the
				// chat action) after the update was queued.
				for _, c := range s.Telegram.Calls(stack.Token(r.bot))[mark:] {
					if c.ChatID() == user {
						m.add("first-action", c.Time.Sub(reply.Sent))
						break
					}
				}
				total := reply.Elapsed
				cli := summaryDuration(sum, "claude_total_ms")
				m.add("total", total)
				m.add("cli-startup", summaryDuration(sum, "claude_startup_ms"))
				m.add("turn1", summaryDuration(sum, "turn1_ms"))
				m.add("turn2", summaryDuration(sum, "turn2_ms"))
				m.add("locate", summaryDuration(sum, "locate_ms"))
				m.add("telegram-send", summaryDuration(sum, "send_ms"))
				m.add("ours", total-cli-summaryDuration(sum, "send_ms"))
			}
			m.report(b)
		})
	}
}

// BenchmarkDriver compares, without Telegram, one request through our
// driver and Locate with what the original system did: the CLI with every
// built-in tool and permissions skipped, and the file found by stat-ing
// every file of a flat output folder it never cleaned (10,000 here).
func BenchmarkDriver(b *testing.B) {
	cli := claudetest.RequireCLI(b)
	model := claudetest.NewModel()
	defer model.Close()
	for _, variant := range []string{"ours", "baseline"} {
		for _, r := range benchRequests {
			b.Run(variant+"/"+r.name, func(b *testing.B) {
				dir := b.TempDir()
				data := filepath.Join(dir, "data")
				fillStale(b, data, 10_000)
				tools := toolstest.Start(b, data, nil)
				env := append(model.Env(), "HOME="+filepath.Join(dir, "home"))
				command := cli
				if variant == "baseline" {
					command = baselineCLI(b, dir, cli)
				}
				// Ours as it runs with an API key: --bare (BRAINBOT_CLAUDE_BARE=auto).
				d, err := claude.New(claude.Config{Command: command, DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets,
					Env: env, Bare: variant == "ours"})
				if err != nil {
					b.Fatal(err)
				}
				mode := map[string]claude.Mode{"text": claude.Text, "speech": claude.Speech, "image": claude.Image}[r.name]
				m := medians{}
				for i := 0; i < b.N; i++ {
					start := time.Now()
					res, err := d.Run(context.Background(), claude.Request{
						Mode: mode, Prompt: r.text, SessionID: uuid.NewString(), SystemPrompt: "Be brief.",
						BotID: "bench", FilePrefix: output.Prefix("bench", int64(i+1), time.Now()),
						Speech: toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "mp3"},
						Image:  toolspec.ImageSettings{Model: "dall-e-2", Size: "256x256"},
					})
					if err != nil {
						b.Fatalf("%s %s: %v", variant, r.name, err)
					}
					m.add("cli-startup", res.Startup)
					if mode != claude.Text {
						kind := output.Audio
						if mode == claude.Image {
							kind = output.Image
						}
						locStart := time.Now()
						if variant == "ours" {
							_, err = output.Locate(filepath.Join(data, kind.Dir()), res.FilePrefix, res.FileExt, res.FilePath)
						} else {
							_, err = baselineLocate(filepath.Join(data, kind.Dir()), res.FilePrefix, res.FileExt)
						}
						if err != nil {
							b.Fatal(err)
						}
						m.add("locate", time.Since(locStart))
					}
					m.add("total", time.Since(start))
				}
				m.report(b)
			})
		}
	}
}

// fillStale puts n old files of other users in both flat output folders.
func fillStale(b *testing.B, data string, n int) {
	b.Helper()
	for _, kind := range []output.Kind{output.Audio, output.Image} {
		dir := filepath.Join(data, kind.Dir())
		if err := os.MkdirAll(dir, 0o750); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("bot-other-user-%d-%d-%d.bin", i, 1700000000000+i, 1700000000500+i)
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o640); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// baselineLocate finds a file the way the original system did: list the
// folder, stat every matching file, sort by modification time.
func baselineLocate(dir, prefix, ext string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	type file struct {
		path string
		mod  time.Time
	}
	var files []file
	for _, e := range entries {
		info, err := e.Info() // the original stat-ed every file (fs.statSync)
		if err != nil {
			continue
		}
		if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ext) {
			files = append(files, file{filepath.Join(dir, e.Name()), info.ModTime()})
		}
	}
	if len(files) == 0 {
		return "", output.ErrNotFound
	}
	slices.SortFunc(files, func(a, b file) int { return b.mod.Compare(a.mod) })
	return files[0].path, nil
}

// baselineCLI writes a wrapper that runs the real CLI the way the original
// system did: every built-in tool, permissions skipped (IS_SANDBOX lets
// that run as root), no strict MCP config.
func baselineCLI(b *testing.B, dir, cli string) string {
	b.Helper()
	path := filepath.Join(dir, "claude-baseline")
	script := `#!/bin/sh
# The original system's command line, from our driver's: drop the
# restrictions (--tools "", --allowedTools, --permission-mode,
# --strict-mcp-config) and skip permissions instead.
n=$#
i=0
while [ $i -lt $n ]; do
	a=$1; shift; i=$((i+1))
	case "$a" in
	--tools|--allowedTools|--permission-mode) shift; i=$((i+1)) ;;
	--bare) ;;
	--strict-mcp-config) ;;
	*) set -- "$@" "$a" ;;
	esac
done
IS_SANDBOX=1 exec ` + strconv.Quote(cli) + ` "$@" --dangerously-skip-permissions
`
	if err := os.WriteFile(path, []byte(script), 0o750); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkMemory reports resident memory: brainbot idle, brainbot with
// 10,000 stored sessions, and one Claude CLI process while it answers (the
// MCP tools run inside brainbot).
func BenchmarkMemory(b *testing.B) {
	b.Run("brainbot-idle", func(b *testing.B) {
		s := newStack(b, nil)
		time.Sleep(time.Second) // let start-up garbage be collected
		b.ReportMetric(rssMB(b, s.PID()), "rss-MB")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("brainbot-10k-sessions", func(b *testing.B) {
		s := newStack(b, func(s *stack.Stack) {
			db, err := sqlite.Open(context.Background(), filepath.Join(s.DataDir, "brainbot.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			for u := int64(1); u <= 10_000; u++ {
				if err := db.UseSession(context.Background(), message.Key{Bot: "narrator", Chat: u}, uuid.NewString(), time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
		// Touch a stored session, as a returning user would.
		ask(b, s, "narrator", 5_000, "hello again")
		time.Sleep(time.Second)
		b.ReportMetric(rssMB(b, s.PID()), "rss-MB")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("claude-process", func(b *testing.B) {
		s := newStack(b, nil)
		p := s.Send("speaker", 77, "#slow speak to me") // the model waits 1s: the CLI is alive
		var peak float64
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			cli := 0.0
			for _, proc := range claudetest.ProcessesUnder(s.DataDir) {
				if proc.PID != s.PID() {
					cli += rssMBOrZero(proc.PID)
				}
			}
			peak = max(peak, cli)
			if _, err := p.Wait(timeoutCtx(b, 10*time.Millisecond)); err == nil {
				break
			}
		}
		b.ReportMetric(peak, "cli-rss-MB")
		b.ReportMetric(0, "ns/op")
	})
}

func timeoutCtx(b *testing.B, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	b.Cleanup(cancel)
	return ctx
}

func rssMB(b *testing.B, pid int) float64 {
	b.Helper()
	v := rssMBOrZero(pid)
	if v == 0 {
		b.Fatalf("no RSS for pid %d", pid)
	}
	return v
}

// rssMBOrZero reads VmRSS from /proc (0 if the process is gone).
func rssMBOrZero(pid int) float64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
