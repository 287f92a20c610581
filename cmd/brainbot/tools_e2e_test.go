package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/mcp/audio"
	"brainbot/output"
)

// The end-to-end suite of brains that bring their own tools: brainbot run,
// the real Claude Code CLI, a stdio MCP server of the brain's
// (testdata/toolserver) and an HTTP one served by the test, which the
// scripted model calls in turn one ("#call", "#loop").

const (
	// toolPassphrase is a value a brain's server gets by reference; its
	// variable's name does not look secret, so only the reference makes
	// brainbot mask it.
	toolPassphrase = "correct-horse-battery-staple-42"
	webToken       = "web-bearer-0123456789abcdef"
)

// toolbotBrain is the brain with tools; %s are the tool server's path and
// the HTTP server's URL.
const toolbotBrain = `name: Toolbot
telegram:
  token_env: TOOLBOT_TOKEN
system_prompt: |
  You are {{bot_name}}, talking to {{user_first_name}} ({{user_language}}) in a {{chat_type}} chat on {{weekday}} {{date}} at {{time}}.
timezone: Asia/Tokyo
claude:
  max_turns: 3
mcp_servers:
  t:
    command: %s
    env: {TOOL_PASSPHRASE: "${TOOL_PASSPHRASE}"}
  web:
    type: http
    url: %s
    headers: {Authorization: "Bearer ${WEB_TOKEN}"}
  gone:
    command: /nonexistent/mcp-server
tools:
  allow: [mcp__t__echo, mcp__t__fail, mcp__t__env, mcp__t__sleep, mcp__web, mcp__gone]
  timeout: 2s
`

// webTools is an MCP server over HTTP that answers only its bearer token,
// with one tool, lookup.
type webTools struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string // the Authorization header of each request
}

func newWebTools(t *testing.T) *webTools {
	s := server.NewMCPServer("web", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("lookup", mcp.WithString("q", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("found " + req.GetString("q", "")), nil
		})
	mcpHandler := server.NewStreamableHTTPServer(s)
	w := &webTools{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.auth = append(w.auth, r.Header.Get("Authorization"))
		w.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+webToken {
			http.Error(rw, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *webTools) authorizations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.auth...)
}

func newToolsStack(t *testing.T, web *webTools) *stack.Stack {
	t.Helper()
	s := startStack(t, stack.Config{
		Brainbot:  brainbotBinary(t),
		ClaudeCmd: claudetest.RequireCLI(t),
		Dir:       t.TempDir(),
		Brains: map[string]string{
			"toolbot.yaml": fmt.Sprintf(toolbotBrain, toolServerBinary(t), web.URL+"/mcp"),
			"speaker.yaml": speakerBrain,
			"painter.yaml": painterBrain,
		},
		Env:  []string{"TOOL_PASSPHRASE=" + toolPassphrase, "WEB_TOKEN=" + webToken, "BRAINBOT_HTTP_ADDR=127.0.0.1:0"},
		Logs: testLogs(t),
	}, nil)
	// A clean stop ends the warm CLIs, which live in process groups of
	// their own: killed with brainbot's group, they would outlive it
	// writing into the HOME the test removes.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if _, err := s.Stop(ctx, syscall.SIGTERM); err != nil {
			t.Errorf("stopping brainbot: %v", err)
		}
	})
	return s
}

// toolCalls are the "tool call" lines of one request.
func toolCalls(s *stack.Stack, r stack.Reply) []stack.Line {
	id := r.Summary.Str("request_id")
	return s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "tool call" && l.Str("request_id") == id })
}

// wantCall asserts the request made exactly one call of the tool, with
// this outcome, logged with the request's ids.
func wantCall(t *testing.T, s *stack.Stack, r stack.Reply, server, tool, outcome string) stack.Line {
	t.Helper()
	var mine []stack.Line
	for _, l := range toolCalls(s, r) {
		if l.Str("server") == server && l.Str("tool") == tool {
			mine = append(mine, l)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("%d tool call lines for %s/%s, want 1: %v", len(mine), server, tool, toolCalls(s, r))
	}
	l := mine[0]
	if l.Str("outcome") != outcome || l.Str("bot") != "toolbot" || l.Int("user") == 0 || l.Fields["duration_ms"] == nil {
		t.Errorf("tool call line %s: want outcome %s with bot, user and duration_ms", l.Raw, outcome)
	}
	return l
}

func TestBrainToolsEndToEnd(t *testing.T) {
	web := newWebTools(t)
	s := newToolsStack(t, web)

	t.Run("the model calls a brain's tool in turn one and answers with its result", func(t *testing.T) {
		r := ask(t, s, "toolbot", 901, `say it back #call mcp__t__echo {"text":"hello tools"}`)
		if got := wantText(t, r); got != claudetest.ToolsReplyPrefix+"mcp__t__echo said: echo: hello tools" {
			t.Errorf("reply = %q", got)
		}
		call := wantCall(t, s, r, "t", "echo", "ok")
		if strings.Contains(call.Raw, "hello tools") {
			t.Errorf("the info line %s shows the arguments", call.Raw)
		}
		// The stack logs at debug level, where the arguments have a line.
		args := s.Logs().Find(0, func(l stack.Line) bool {
			return l.Msg == "tool call arguments" && l.Str("request_id") == r.Summary.Str("request_id")
		})
		if len(args) != 1 || args[0].Level != "debug" || !strings.Contains(args[0].Raw, `"arguments":{"text":"hello tools"}`) {
			t.Errorf("debug lines %v: want one with the arguments", args)
		}
	})

	t.Run("tool calls are kept in the session", func(t *testing.T) {
		before := len(s.Model.Requests())
		if got := wantText(t, ask(t, s, "toolbot", 901, "and now?")); got != "You said: and now? (message 2)" {
			t.Errorf("reply = %q", got)
		}
		reqs := s.Model.Requests()[before:]
		var use, result bool
		for _, m := range reqs[len(reqs)-1].Messages {
			for _, b := range m.Content {
				use = use || b.Type == "tool_use" && b.Name == "mcp__t__echo"
				result = result || b.Type == "tool_result" && strings.Contains(string(b.Content), "echo: hello tools")
			}
		}
		if !use || !result {
			t.Errorf("the next message's request lacks the earlier tool_use (%v) or tool_result (%v)", use, result)
		}
	})

	t.Run("a failing tool's error reaches the model and the answer goes on", func(t *testing.T) {
		r := ask(t, s, "toolbot", 902, "#call mcp__t__fail")
		if got := wantText(t, r); got != claudetest.ToolsReplyPrefix+"mcp__t__fail failed: the tool failed on purpose" {
			t.Errorf("reply = %q", got)
		}
		if l := wantCall(t, s, r, "t", "fail", "error"); l.Str("error") != "the tool failed on purpose" {
			t.Errorf("error call line %s", l.Raw)
		}
	})

	t.Run("a tool not in tools.allow is refused", func(t *testing.T) {
		r := ask(t, s, "toolbot", 903, "#call mcp__t__hidden")
		got := wantText(t, r)
		if !strings.HasPrefix(got, claudetest.ToolsReplyPrefix+"mcp__t__hidden failed: ") || !strings.Contains(got, "denied") {
			t.Errorf("reply = %q, want the model to read the refusal", got)
		}
		wantCall(t, s, r, "t", "hidden", "denied")
	})

	t.Run("a tool slower than tools.timeout is cut off", func(t *testing.T) {
		r := ask(t, s, "toolbot", 904, `#call mcp__t__sleep {"seconds": 20}`)
		// The CLI's words: the call was cut off at 2s (the tool would have
		// answered after 20).
		if got := wantText(t, r); !strings.Contains(got, "mcp__t__sleep failed: ") || !strings.Contains(got, "timed out after 2s") {
			t.Errorf("reply = %q", got)
		}
		wantCall(t, s, r, "t", "sleep", "error")
	})

	t.Run("rounds of tool calls stop at max_turns", func(t *testing.T) {
		before := len(s.Model.Requests())
		r := ask(t, s, "toolbot", 905, `#loop mcp__t__echo {"text":"again"}`)
		if got := wantText(t, r); got != "Sorry, something went wrong. Please try again." {
			t.Errorf("reply = %q, want the error text", got)
		}
		if n := len(s.Model.Requests()) - before; n != 3 {
			t.Errorf("the model was asked %d times, want max_turns' 3", n)
		}
		if n := len(toolCalls(s, r)); n != 3 {
			t.Errorf("%d tool calls logged, want 3", n)
		}
		stopped := s.Logs().Find(0, func(l stack.Line) bool {
			return l.Str("request_id") == r.Summary.Str("request_id") && strings.Contains(l.Raw, "stopped at the request's turn limit")
		})
		if len(stopped) == 0 {
			t.Error("no log line says the request stopped at its turn limit")
		}
	})

	t.Run("an http server gets its headers; secrets reach the servers and no log", func(t *testing.T) {
		r := ask(t, s, "toolbot", 906, `#call mcp__web__lookup {"q":"lighthouse"}`)
		if got := wantText(t, r); got != claudetest.ToolsReplyPrefix+"mcp__web__lookup said: found lighthouse" {
			t.Errorf("reply = %q", got)
		}
		wantCall(t, s, r, "web", "lookup", "ok")
		for _, a := range web.authorizations() {
			if a != "Bearer "+webToken {
				t.Errorf("the http server got Authorization %q", a)
			}
		}

		// A third-party server gets its own env and a minimal base: not the
		// model's key, nor anything else of the CLI's.
		r = ask(t, s, "toolbot", 907, `#call mcp__t__env {"name":"TOOL_PASSPHRASE"} #call mcp__t__env {"name":"TOOLBOT_TOKEN"} #call mcp__t__env {"name":"OPENAI_API_KEY"} `+
			`#call mcp__t__env {"name":"ANTHROPIC_API_KEY"} #call mcp__t__env {"name":"ANTHROPIC_BASE_URL"} #call mcp__t__env {"name":"CLAUDE_CONFIG_DIR"} #call mcp__t__env {"name":"PATH"}`)
		got := wantText(t, r)
		for _, want := range []string{"TOOL_PASSPHRASE=" + toolPassphrase, "TOOLBOT_TOKEN is not set", "OPENAI_API_KEY is not set",
			"ANTHROPIC_API_KEY is not set", "ANTHROPIC_BASE_URL is not set", "CLAUDE_CONFIG_DIR is not set", "PATH=/"} {
			if !strings.Contains(got, want) {
				t.Errorf("reply %q lacks %q: the server's environment is wrong", got, want)
			}
		}
		fileLog, err := os.ReadFile(s.LogFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{toolPassphrase, webToken} {
			if strings.Contains(s.Logs().Text()+string(fileLog), secret) {
				t.Errorf("a log holds the secret %q", secret)
			}
		}
		// The secrets are in the MCP configs of the CLIs still running
		// (warm), each private to brainbot's user.
		configs, _ := filepath.Glob(filepath.Join(s.DataDir, "claude", "mcp", "*"))
		for _, c := range configs {
			if info, err := os.Stat(c); err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("MCP config %s: %v, %v; want mode 0600", c, info.Mode(), err)
			}
		}
	})

	t.Run("a server that does not start is a warning, and the bot still answers", func(t *testing.T) {
		r := ask(t, s, "toolbot", 908, "hello")
		if got := wantText(t, r); got != "You said: hello (message 1)" {
			t.Errorf("reply = %q", got)
		}
		warns := s.Logs().Find(0, func(l stack.Line) bool {
			return l.Msg == "MCP server not connected: the model cannot use its tools" && l.Str("server") == "gone" &&
				l.Str("request_id") == r.Summary.Str("request_id")
		})
		if len(warns) != 1 || warns[0].Level != "warn" {
			t.Errorf("warnings %v, want one for the server gone", warns)
		}
	})

	// The bot's name is in the prompt the CLI starts with; what varies per
	// message comes with the message, in a note ahead of the user's words.
	t.Run("the system prompt's variables reach the model", func(t *testing.T) {
		before := len(s.Model.Requests())
		ask(t, s, "toolbot", 909, "what day is it?")
		req := s.Model.Requests()[before]
		const prompt = "You are Toolbot, talking to {{user_first_name}} ({{user_language}}) in a {{chat_type}} chat on {{weekday}} {{date}} at {{time}}."
		if !strings.Contains(req.System, prompt) || strings.Contains(req.System, "User909") {
			t.Errorf("system prompt %q, want the bot's name filled and the rest placeholders", req.System)
		}
		tokyo, _ := time.LoadLocation("Asia/Tokyo")
		now := time.Now().In(tokyo)
		note := regexp.MustCompile(`^<brainbot-context>\{"user_first_name":"User909","user_language":"` + telegramtest.UserLanguage +
			`","chat_type":"private","date":"` + now.Format(time.DateOnly) + `","weekday":"` + now.Weekday().String() + `","time":"\d\d:\d\d JST"\}</brainbot-context>$`)
		var first string
		for _, m := range req.Messages {
			if m.Role == "user" && len(m.Content) > 0 {
				first = m.Content[0].Text
			}
		}
		if !note.MatchString(first) {
			t.Errorf("the message opens with %q, want it to match %s", first, note)
		}
	})

	t.Run("tool calls are counted in the metrics", func(t *testing.T) {
		lines := s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "admin endpoint listening" })
		if len(lines) != 1 {
			t.Fatal("no admin endpoint log line")
		}
		_, body := get(t, "http://"+lines[0].Str("addr")+"/metrics")
		for _, want := range []string{
			`brainbot_tool_call_seconds_count{bot="toolbot",outcome="ok",server="t",tool="echo"} 4`,
			`brainbot_tool_call_seconds_count{bot="toolbot",outcome="error",server="t",tool="fail"} 1`,
			`brainbot_tool_call_seconds_count{bot="toolbot",outcome="denied",server="t",tool="hidden"} 1`,
			`brainbot_tool_call_seconds_count{bot="toolbot",outcome="ok",server="web",tool="lookup"} 1`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q\n%s", want, grepLines(body, "brainbot_tool"))
			}
		}
	})

	t.Run("a voice note and a picture get a sidecar, removed with them", func(t *testing.T) {
		voice := ask(t, s, "speaker", 910, "tell me a story")
		if m := voice.Methods(); len(m) != 1 || m[0] != "sendVoice" {
			t.Fatalf("want a voice note, got %v", m)
		}
		ask(t, s, "painter", 911, "draw a lighthouse")

		audioDir := filepath.Join(s.DataDir, "audio-output", "bot-speaker", "user-910")
		file, meta := readSidecar(t, audioDir)
		data, _ := os.ReadFile(file)
		seconds, _ := audio.MP3Duration(data)
		if meta.Mode != "speech" || meta.Text != "You said: tell me a story (message 1)" || meta.Voice != "nova" ||
			meta.Model != "tts-1" || meta.Format != "mp3" || meta.Bytes != int64(len(data)) || meta.DurationSeconds != seconds.Seconds() ||
			meta.DurationSeconds <= 0 || meta.CostUSD == nil || *meta.CostUSD <= 0 || meta.BotID != "speaker" || meta.Brain != "Speaker" ||
			meta.User != 910 || meta.Chat != 910 || meta.RequestID != voice.Summary.Str("request_id") {
			t.Errorf("voice sidecar %+v", meta)
		}

		imageDir := filepath.Join(s.DataDir, "image-output", "bot-painter", "user-911")
		picture, meta := readSidecar(t, imageDir)
		f, err := os.Open(picture)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || meta.Mode != "image" || meta.Prompt != "draw a lighthouse" || meta.Model != "dall-e-2" || meta.Size != "256x256" ||
			meta.Width != cfg.Width || meta.Height != cfg.Height || meta.Width == 0 || meta.CostUSD == nil {
			t.Errorf("picture sidecar %+v (png %v, %v)", meta, cfg, err)
		}

		// Retention, as brainbot applies it hourly: each file goes with its
		// sidecar.
		if _, err := output.Prune(s.DataDir, output.Audio, output.Retention{MaxBytes: 1}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if left, err := os.ReadDir(audioDir); err != nil || len(left) != 0 {
			t.Errorf("after pruning, %v are left (%v)", left, err)
		}
	})
}

// readSidecar reads the one organised file in dir and its sidecar.
func readSidecar(t *testing.T, dir string) (string, output.Metadata) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, filepath.Join(dir, e.Name()))
	}
	if len(files) != 2 || files[1] != files[0]+output.SidecarExt {
		t.Fatalf("%s holds %v, want a file and its sidecar", dir, files)
	}
	data, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	var m output.Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("sidecar is not JSON: %v\n%s", err, data)
	}
	if m.File != filepath.Base(files[0]) {
		t.Errorf("sidecar names %q, want %q", m.File, filepath.Base(files[0]))
	}
	return files[0], m
}
