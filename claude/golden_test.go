package claude

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"brainbot/claude/claudetest"
	"brainbot/claude/streamjson"
	"brainbot/mcp/toolstest"
	"brainbot/ticket"
	"brainbot/toolspec"
)

var updateGolden = flag.Bool("update", false, "re-capture testdata/*.jsonl from the real Claude CLI and rewrite the .golden summaries")

// A golden transcript is the real CLI's stdout for one request, captured
// against the scripted model (claudetest.Model) with our MCP servers.
type transcript struct {
	name string
	mode Mode
	// resume continues goldenSession (which the capture never created),
	// instead of starting it.
	resume bool
	turns  func(t *testing.T) []string
}

// goldenSession is the conversation id used in every capture, so the
// transcripts do not change for no reason when they are re-captured.
const goldenSession = "7d3c1e2a-5b4f-4a6e-8c9d-0e1f2a3b4c5d"

const goldenPrefix = "bot-golden-user-42-1700000000000"

// The brain settings of the captured speech and image requests.
var (
	goldenSpeech = toolspec.SpeechSettings{Voice: "nova", Speed: 1, Model: "tts-1", Format: "mp3"}
	goldenImage  = toolspec.ImageSettings{Model: "dall-e-2", Size: "256x256"}
)

// turn1Reply is the scripted model's deterministic answer to "hello".
const turn1Reply = "You said: hello (message 1)"

var transcripts = []transcript{
	{name: "text", turns: func(*testing.T) []string { return []string{"hello"} }},
	{name: "speech", mode: Speech, turns: func(t *testing.T) []string {
		return []string{"hello", mustTurn2(t, Request{Mode: Speech, Speech: goldenSpeech}, turn1Reply)}
	}},
	{name: "image", mode: Image, turns: func(t *testing.T) []string {
		return []string{"draw a cat", mustTurn2(t, Request{Mode: Image, Image: goldenImage}, "You said: draw a cat (message 1)")}
	}},
	{name: "resume-unknown", resume: true, turns: func(*testing.T) []string { return []string{"hello"} }},
}

func mustTurn2(t *testing.T, req Request, turn1 string) string {
	t.Helper()
	req.FilePrefix = goldenPrefix
	p, err := turn2Prompt(req, turn1, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGoldenTranscripts(t *testing.T) {
	for _, tr := range transcripts {
		t.Run(tr.name, func(t *testing.T) {
			jsonl := filepath.Join("testdata", tr.name+".jsonl")
			golden := filepath.Join("testdata", tr.name+".golden")
			if *updateGolden {
				if err := os.WriteFile(jsonl, capture(t, tr), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(jsonl)
			if err != nil {
				t.Fatal(err)
			}

			got := summarizeLines(t, data)
			if bulk := summarizeStream(t, data); bulk != got {
				t.Errorf("reading the transcript as a stream gives\n%s\nline by line gives\n%s", bulk, got)
			}
			crlf := bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))
			if withCRLF := summarizeStream(t, crlf); withCRLF != got {
				t.Errorf("with CRLF line ends the summary is\n%s\nwith LF\n%s", withCRLF, got)
			}

			if *updateGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("summary of %s differs from %s (re-capture with -update if the CLI changed)\ngot:\n%s\nwant:\n%s", jsonl, golden, got, want)
			}
		})
	}
}

// summarizeLines parses each line on its own with streamjson.Parse.
func summarizeLines(t *testing.T, data []byte) string {
	t.Helper()
	var s summary
	for line := range bytes.Lines(data) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := streamjson.Parse(line)
		if err != nil {
			t.Fatalf("line %d: %v", s.n+1, err)
		}
		s.add(ev)
	}
	return s.String()
}

// summarizeStream parses the whole transcript as the driver does: its
// lines framed as cliproc frames them, each parsed with ParseLine.
func summarizeStream(t *testing.T, data []byte) string {
	t.Helper()
	var s summary
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, streamjson.MaxLineSize)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		ev, err := streamjson.ParseLine(n, sc.Bytes(), nil)
		if err != nil {
			t.Fatalf("after %d events: %v", s.n, err)
		}
		s.add(ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return s.String()
}

// summary is what a golden file pins down: per event its kind, type,
// session, blocks and result, with volatile values replaced.
type summary struct {
	b strings.Builder
	n int
}

// Volatile values in event fields: the tools' output folder and
// the millisecond suffix they add, and the capture's random ids.
var (
	volatilePath = regexp.MustCompile(`/[^"\s]*/(bot-[^/"\s]*?)-\d{13}(\.\w+)`)
	volatileUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

func stable(s string) string {
	s = strings.ReplaceAll(s, goldenSession, "<session>")
	s = volatilePath.ReplaceAllString(s, "<out>/$1-<ms>$2")
	return volatileUUID.ReplaceAllString(s, "<uuid>")
}

func (s *summary) add(ev streamjson.Event) {
	s.n++
	fmt.Fprintf(&s.b, "%d %s %s", s.n, ev.Kind, ev.Type)
	if ev.Subtype != "" {
		fmt.Fprintf(&s.b, "/%s", ev.Subtype)
	}
	if ev.SessionID != "" {
		fmt.Fprintf(&s.b, " session=%s", stable(ev.SessionID))
	}
	for _, b := range ev.Blocks {
		switch b.Type {
		case "text":
			fmt.Fprintf(&s.b, "\n  text %q", stable(b.Text))
		case "tool_use":
			fmt.Fprintf(&s.b, "\n  tool_use %s %s", b.Name, stable(string(b.Input)))
		case "tool_result":
			fmt.Fprintf(&s.b, "\n  tool_result is_error=%v %q", b.IsError, stable(b.Text))
		default:
			fmt.Fprintf(&s.b, "\n  %s", b.Type)
		}
	}
	if ev.Kind == streamjson.KindPermissionDenied {
		fmt.Fprintf(&s.b, "\n  denied %s", ev.Denial.ToolName)
	}
	if r := ev.Result; r != nil {
		fmt.Fprintf(&s.b, "\n  result subtype=%s is_error=%v turns=%d cost>0=%v text=%q", r.Subtype, r.IsError, r.NumTurns, r.CostUSD > 0, stable(r.Text))
		for _, e := range r.Errors {
			fmt.Fprintf(&s.b, "\n  error %q", stable(e))
		}
		for _, d := range r.Denials {
			fmt.Fprintf(&s.b, "\n  denial %s", d.ToolName)
		}
	}
	s.b.WriteByte('\n')
}

func (s *summary) String() string { return s.b.String() }

// capture runs the real CLI, in the driver's invocation and with our real
// MCP servers (built from ./cmd/brainbot) talking to the OpenAI stand-in,
// against the scripted model, and returns its stdout.
func capture(t *testing.T, tr transcript) []byte {
	t.Helper()
	cli, err := claudetest.CLIPath()
	if err != nil {
		t.Fatalf("-update needs the real CLI: %v", err)
	}
	model := claudetest.NewModel()
	defer model.Close()

	dir := t.TempDir()
	home, data := filepath.Join(dir, "home"), filepath.Join(dir, "data")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	tools := toolstest.Start(t, data, nil)
	env := append(model.Env(), "HOME="+home)
	d, err := New(Config{Command: cli, DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	req := Request{Mode: tr.mode, SessionID: goldenSession, Resume: tr.resume, SystemPrompt: "You are a golden test bot.",
		BotID: "golden", FilePrefix: goldenPrefix, Speech: goldenSpeech, Image: goldenImage}
	if err := d.prepareBot(req.BotID); err != nil {
		t.Fatal(err)
	}
	// The turn-2 call is the one allowed; the scripted turn 1 calls nothing.
	proc := tools.Tickets.Connect()
	defer proc.Close()
	proc.Open(ticket.Ticket{Tool: tr.mode.tool(), Prefix: goldenPrefix, Speech: speechSettings(req), Image: req.Image})
	mcpConfig, err := d.writeMCPConfig(proc.Token(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The driver's own command line and environment; CLIRun keeps stdout.
	run := claudetest.CLIRun{Path: cli, Args: d.args(req, mcpConfig), Dir: d.workDir(req.BotID), Env: d.env(req.BotID, t.TempDir())}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, err := run.Turns(ctx, tr.turns(t)...)
	var exit *exec.ExitError
	if err != nil && !(tr.resume && errors.As(err, &exit)) {
		t.Fatalf("capture %s: %v", tr.name, err)
	}
	return stdout
}
