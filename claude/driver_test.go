package claude

import (
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/claude/claudetest"
	"brainbot/claude/cliproc"
	"brainbot/claude/streamjson"
	"brainbot/mcp"
	"brainbot/mcp/toolstest"
	"brainbot/output"
	"brainbot/sysprompt"
	"brainbot/ticket"
	"brainbot/toolspec"
)

func TestMain(m *testing.M) {
	claudetest.RunFakeCLIIfRequested()
	runTestParentIfRequested()
	os.Exit(m.Run())
}

// fakeLauncher stands for brainbot's executable in the MCP configs: the
// fake CLI starts no stdio server.
const fakeLauncher = "/opt/brainbot/bin/brainbot"

// fakeEnv is a Driver running the fake CLI (the test binary itself) with
// its own data folder and our real tool server in front of the OpenAI
// stand-in.
type fakeEnv struct {
	d     *Driver
	data  string
	tools *toolstest.Tools
	// logs are the driver's log lines (info and up).
	logs *observer.ObservedLogs
}

// observedLog is a test's logger whose lines (info and up) are kept.
func observedLog(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	observed, logs := observer.New(zapcore.InfoLevel)
	return zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), observed)), logs
}

func newFakeEnv(t *testing.T) *fakeEnv {
	t.Helper()
	return newFakeEnvWith(t, func(*Config) {})
}

// newFakeEnvWith is newFakeEnv with the driver's config changed by adjust.
func newFakeEnvWith(t *testing.T, adjust func(*Config)) *fakeEnv {
	t.Helper()
	checkNoLeaks(t)
	data := t.TempDir()
	log, logs := observedLog(t)
	tools := toolstest.Start(t, data, log)
	cfg := Config{
		Command:  os.Args[0],
		DataDir:  data,
		ToolsURL: tools.URL,
		Tickets:  tools.Tickets,
		Env:      claudetest.FakeCLIEnv(),
		Launcher: fakeLauncher,
		Log:      log,
		cpuBusy:  idleCPUs,
	}
	adjust(&cfg)
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close) // before the leak check, which runs last
	return &fakeEnv{d: d, data: data, tools: tools, logs: logs}
}

func (e *fakeEnv) request(mode Mode, prompt string) Request {
	return Request{
		Mode:              mode,
		Prompt:            prompt,
		SessionID:         uuid.NewString(),
		SystemPrompt:      "You are a test bot.",
		BotID:             "test",
		FilePrefix:        output.Prefix("test", 42, time.Now()),
		Speech:            toolspec.SpeechSettings{Voice: "nova", Speed: 1.25, Model: "tts-1", Format: "mp3"},
		Image:             toolspec.ImageSettings{Model: "dall-e-3", Size: "1024x1024", Quality: "hd", Style: "vivid"},
		InactivityTimeout: time.Minute, // hang guards only; tests that time out set their own
		MaxDuration:       2 * time.Minute,
	}
}

func (e *fakeEnv) run(t *testing.T, req Request) (*Result, error) {
	t.Helper()
	return e.d.Run(context.Background(), req)
}

func (e *fakeEnv) mustRun(t *testing.T, req Request) *Result {
	t.Helper()
	res, err := e.run(t, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// checkNoLeaks fails the test if, once it is over, a process started as
// the fake CLI (or one of its children) is still alive or goroutines are
// left over.
func checkNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		// Killed processes and finished goroutines take a moment to
		// disappear; poll, with a generous bound for a loaded machine.
		deadline := time.Now().Add(10 * time.Second)
		for {
			procs := claudetest.FakeProcesses()
			n := runtime.NumGoroutine()
			if len(procs) == 0 && n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("leak: fake CLI processes %v alive, %d goroutines (%d before)\n%s", procs, n, before, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// Each CLI gets its own MCP config naming our two servers over HTTP with
// its token: private to brainbot's user, and gone with the process.
func TestMCPConfigPerProcess(t *testing.T) {
	e := newFakeEnv(t)
	path, err := e.d.writeMCPConfig("tok123", Request{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 || filepath.Dir(path) != filepath.Join(e.data, "claude", "mcp") {
		t.Errorf("config %s: %v, %v; want mode 0600 in DataDir/claude/mcp", path, info, err)
	}
	data, _ := os.ReadFile(path)
	want := `{"mcpServers":{"image-gen":{"type":"http","url":"` + e.tools.URL + `/image-gen","headers":{"Authorization":"Bearer tok123"}},` +
		`"tts":{"type":"http","url":"` + e.tools.URL + `/tts","headers":{"Authorization":"Bearer tok123"}}}}`
	if string(data) != want {
		t.Errorf("MCP config\n got %s\nwant %s", data, want)
	}
	if info, err := os.Stat(filepath.Dir(path)); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("config folder: %v, %v; want mode 0700", info, err)
	}

	// A request's own servers join ours, each with the request's tool
	// timeout, their secrets in this private file only; a stdio one starts
	// through brainbot (package launch), which keeps only its own env.
	path, err = e.d.writeMCPConfig("tok123", Request{
		MCPServers: map[string]MCPServer{
			"clock":  {Type: "stdio", Command: "/bin/clock", Args: []string{"-z"}, Env: map[string]string{"ZONE": "UTC", "KEY": "s3cret"}},
			"search": {Type: "http", URL: "https://search.example/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		},
		ToolTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	want = `{"mcpServers":{"clock":{"type":"stdio","command":"` + fakeLauncher + `","args":["mcp","exec","-keep","KEY","-keep","ZONE","--","/bin/clock","-z"],"env":{"KEY":"s3cret","ZONE":"UTC"},"timeout":20000},` +
		`"image-gen":{"type":"http","url":"` + e.tools.URL + `/image-gen","headers":{"Authorization":"Bearer tok123"}},` +
		`"search":{"type":"http","url":"https://search.example/mcp","headers":{"Authorization":"Bearer s3cret"},"timeout":20000},` +
		`"tts":{"type":"http","url":"` + e.tools.URL + `/tts","headers":{"Authorization":"Bearer tok123"}}}}`
	if string(data) != want {
		t.Errorf("MCP config with the request's servers\n got %s\nwant %s", data, want)
	}
	os.Remove(path)

	// Without the launcher, no stdio server starts.
	e.d.cfg.Launcher = ""
	if _, err := e.d.writeMCPConfig("tok123", Request{MCPServers: map[string]MCPServer{"clock": {Command: "/bin/clock"}}}); err == nil {
		t.Error("a stdio server was configured without the launcher")
	}
	e.d.cfg.Launcher = fakeLauncher

	// A config left behind (a crash) is removed by the next start, and a
	// request leaves none.
	again, err := New(e.d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	e.mustRun(t, e.request(Speech, "hello"))
	if left, _ := os.ReadDir(filepath.Dir(path)); len(left) != 0 {
		t.Errorf("MCP configs left: %v", left)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	tickets := ticket.NewRegistry()
	for name, cfg := range map[string]Config{
		"no command":       {DataDir: dir, ToolsURL: "http://127.0.0.1:1", Tickets: tickets},
		"relative datadir": {Command: "claude", DataDir: "data", ToolsURL: "http://127.0.0.1:1", Tickets: tickets},
		"no tool server":   {Command: "claude", DataDir: dir, Tickets: tickets},
		"no tickets":       {Command: "claude", DataDir: dir, ToolsURL: "http://127.0.0.1:1"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

func TestArgs(t *testing.T) {
	d := &Driver{}
	const mcpConfig = "/data/claude/mcp/cli-1.json"
	tools := toolspec.SpeechTool + "," + toolspec.ImageTool
	d.cfg.DataDir = "/data"
	// The prompt is in a file named by its text, in the bot's HOME.
	prompt := func(text string) string { return promptFile("/data/claude/home/bot-b", text) }
	req := Request{Mode: Text, SessionID: "s", SystemPrompt: "-be nice", BotID: "b"}
	want := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--disable-slash-commands", "--setting-sources", "user", "--session-id", "s", "--system-prompt-file", prompt("-be nice"), "--system-prompt-snapshot", "off",
		"--tools", "", "--strict-mcp-config", "--mcp-config", mcpConfig,
		"--allowedTools", tools, "--permission-mode", "dontAsk"}
	if got := d.args(req, mcpConfig); !slices.Equal(got, want) {
		t.Errorf("text args\n got %q\nwant %q", got, want)
	}

	req = Request{Mode: Image, SessionID: "s", Resume: true, SystemPrompt: "p", Model: "claude-x", BotID: "b"}
	want = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--disable-slash-commands", "--setting-sources", "user", "--resume", "s", "--system-prompt-file", prompt("p"), "--system-prompt-snapshot", "off", "--model", "claude-x",
		"--tools", "", "--strict-mcp-config", "--mcp-config", mcpConfig,
		"--allowedTools", tools, "--permission-mode", "dontAsk"}
	if got := d.args(req, mcpConfig); !slices.Equal(got, want) {
		t.Errorf("image args\n got %q\nwant %q", got, want)
	}
	// The budget is the driver's to check, per request: the CLI's
	// --max-budget-usd would count what a warm process spent in all.
	req.MaxTurns, req.MaxBudgetUSD = 3, 0.25
	if got := d.args(req, mcpConfig); !slices.Equal(got[len(got)-4:len(got)-2], []string{"--max-turns", "3"}) || slices.Contains(got, "--max-budget-usd") {
		t.Errorf("bounds: args %q", got)
	}
	if slices.Contains(d.args(req, mcpConfig), "--bare") {
		t.Error("--bare without Config.Bare")
	}
	d.cfg.Bare = true
	if got := d.args(req, mcpConfig); !slices.Contains(got, "--bare") {
		t.Errorf("Config.Bare: args %q lack --bare", got)
	}

	// A request's own tools join ours in the allow-list, and its system
	// prompt is the process's: the bot's name filled, the per-message
	// variables placeholders (sysprompt.ForProcess).
	req = Request{Mode: Text, SessionID: "s", BotID: "b", SystemPrompt: "I am {{bot_name}} on {{ date }}; {{time}} stays",
		PromptVars:   sysprompt.Vars{sysprompt.BotName: "Clock", sysprompt.Date: "2026-11-23"},
		AllowedTools: []string{"mcp__clock__now", "mcp__search"}}
	got := d.args(req, mcpConfig)
	if i := slices.Index(got, "--allowedTools"); i < 0 || got[i+1] != tools+",mcp__clock__now,mcp__search" {
		t.Errorf("allowed tools: args %q", got)
	}
	if i := slices.Index(got, "--system-prompt-file"); i < 0 || got[i+1] != prompt(sysprompt.ForProcess(req.SystemPrompt, req.PromptVars)) ||
		!strings.HasPrefix(sysprompt.ForProcess(req.SystemPrompt, req.PromptVars), "I am Clock on {{date}}; {{time}} stays\n\n") {
		t.Errorf("system prompt: args %q", got)
	}
	if slices.ContainsFunc(got, func(a string) bool { return strings.Contains(a, "I am Clock") }) {
		t.Errorf("the system prompt is on the command line: %q", got)
	}
}

func TestCLIEnv(t *testing.T) {
	parent := []string{"PATH=/bin", "CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli", "CLAUDE_CODE_SSE_PORT=123",
		"CLAUDE_CODE_USE_BEDROCK=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CONFIG_DIR=/c",
		"OPENAI_API_KEY=k", "BOT_TOKEN=1:x", "ENABLE_TOOL_SEARCH=true", "ANTHROPIC_BASE_URL=http://a", "AWS_PROFILE=p"}
	got := cliEnv(parent, []string{"EXTRA=1"})
	want := []string{"PATH=/bin", "CLAUDE_CODE_USE_BEDROCK=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"ANTHROPIC_BASE_URL=http://a", "AWS_PROFILE=p",
		"ENABLE_TOOL_SEARCH=false", "BUN_GC_TIMER_DISABLE=1", "EXTRA=1"}
	if !slices.Equal(got, want) {
		t.Errorf("cliEnv\n got %q\nwant %q", got, want)
	}
	// An operator's choice of Bun's idle GC timer is kept, not overridden.
	got = cliEnv([]string{"PATH=/bin", "BUN_GC_TIMER_INTERVAL=5000"}, nil)
	want = []string{"PATH=/bin", "BUN_GC_TIMER_INTERVAL=5000", "ENABLE_TOOL_SEARCH=false"}
	if !slices.Equal(got, want) {
		t.Errorf("cliEnv with the operator's GC timer\n got %q\nwant %q", got, want)
	}
}

// The CLI sees only the variables it needs: no bot's token, no OpenAI key
// (the tools run in brainbot), nothing off the allow-list.
func TestCLIGetsOnlyTheEnvironmentItNeeds(t *testing.T) {
	for k, v := range map[string]string{
		"NARRATOR_TOKEN": "123456:narrator-secret", "PAINTER_TOKEN": "654321:painter-secret",
		"OPENAI_API_KEY": "sk-openai-secret", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
		"DATABASE_URL": "postgres://secret", "BRAINBOT_LOG_LEVEL": "debug",
		"CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "cli",
		"ANTHROPIC_API_KEY": "sk-ant-kept", "AWS_REGION": "eu-west-1", "CLOUD_ML_REGION": "us-east5",
		"LC_ALL": "C.UTF-8", "https_proxy": "http://proxy:3128", "NO_PROXY": "localhost",
		"CLAUDE_CODE_USE_BEDROCK": "1", "TZ": "UTC",
	} {
		t.Setenv(k, v)
	}
	e := newFakeEnv(t)
	res := e.mustRun(t, e.request(Text, "#env"))
	got := map[string]string{}
	for _, kv := range strings.Split(res.Text, "\n") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, secret := range []string{"narrator-secret", "painter-secret", "sk-openai-secret", "postgres://secret"} {
		if strings.Contains(res.Text, secret) {
			t.Errorf("the CLI's environment holds %q", secret)
		}
	}
	for _, k := range []string{"ANTHROPIC_API_KEY", "AWS_REGION", "CLOUD_ML_REGION", "LC_ALL", "https_proxy", "NO_PROXY",
		"CLAUDE_CODE_USE_BEDROCK", "TZ", "PATH", "HOME"} {
		if _, ok := got[k]; !ok {
			t.Errorf("the CLI lacks %s", k)
		}
	}
	if got["ENABLE_TOOL_SEARCH"] != "false" {
		t.Errorf("ENABLE_TOOL_SEARCH = %q, want the driver's false", got["ENABLE_TOOL_SEARCH"])
	}
	if got["BUN_GC_TIMER_DISABLE"] != "1" {
		t.Errorf("BUN_GC_TIMER_DISABLE = %q, want the driver's 1", got["BUN_GC_TIMER_DISABLE"])
	}
	if tmp := got["TMPDIR"]; filepath.Dir(tmp) != filepath.Join(e.data, "claude", "tmp") {
		t.Errorf("TMPDIR = %q, want the process's own folder under %s", tmp, filepath.Join(e.data, "claude", "tmp"))
	}
	fake := map[string]bool{}
	for _, kv := range claudetest.FakeCLIEnv() {
		k, _, _ := strings.Cut(kv, "=")
		fake[k] = true
	}
	for k := range got {
		if !allowedEnv(k) && k != "ENABLE_TOOL_SEARCH" && k != "TMPDIR" && k != "CLAUDE_CONFIG_DIR" && !fake[k] {
			t.Errorf("the CLI got %s, which is off the list", k)
		}
	}
}

// A brain's bounds reach the CLI, and hitting one is its own error: the
// caller answers with the brain's error text and the log says which.
func TestRunBounds(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Speech, "hello")
	req.MaxTurns = 1 // turn 2 needs the tool call and the answer to its result
	if _, err := e.run(t, req); !errors.Is(err, errMaxTurns) || !errors.Is(err, ErrBounded) {
		t.Errorf("speech with max turns 1: %v, want errMaxTurns, an ErrBounded", err)
	}
	req = e.request(Speech, "hello")
	req.MaxTurns = 2
	e.mustRun(t, req)

	req = e.request(Text, "hello")
	req.MaxBudgetUSD = 0.001 // one fake turn costs 0.0025
	if _, err := e.run(t, req); !errors.Is(err, errMaxBudget) || !errors.Is(err, ErrBounded) {
		t.Errorf("text over budget: %v, want errMaxBudget, an ErrBounded", err)
	}
	req = e.request(Speech, "hello")
	req.MaxBudgetUSD = 0.004 // turn 1 fits, turn 2 does not
	if _, err := e.run(t, req); !errors.Is(err, errMaxBudget) {
		t.Errorf("speech over budget in turn 2: %v, want errMaxBudget", err)
	}
}

func TestRunRejectsBadRequest(t *testing.T) {
	e := newFakeEnv(t)
	for name, mutate := range map[string]func(*Request){
		"session id not a UUID": func(r *Request) { r.SessionID = "abc" },
		"bot id with a slash":   func(r *Request) { r.BotID = "../x" },
		"file without a prefix": func(r *Request) { r.Mode = Image; r.FilePrefix = "" },
		"unknown mode":          func(r *Request) { r.Mode = Mode(7) },
		"bad speech format":     func(r *Request) { r.Mode = Speech; r.Speech.Format = "wav" },
		"a server named like ours": func(r *Request) {
			r.MCPServers = map[string]MCPServer{toolspec.SpeechServer: {Type: "stdio", Command: "/bin/tts"}}
		},
	} {
		req := e.request(Text, "hi")
		mutate(&req)
		if _, err := e.run(t, req); err == nil {
			t.Errorf("%s: Run accepted the request", name)
		}
	}
}

func TestTextTurn(t *testing.T) {
	// A parent Claude Code session's markers must not reach the CLI (the
	// fake, like the real one, refuses to run nested).
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
	e := newFakeEnv(t)
	req := e.request(Text, "hello")
	res := e.mustRun(t, req)
	if res.Text != "You said: hello" {
		t.Errorf("Text = %q", res.Text)
	}
	if res.SessionID != req.SessionID {
		t.Errorf("SessionID = %q, want %q", res.SessionID, req.SessionID)
	}
	if res.CostUSD != 0.0025 {
		t.Errorf("CostUSD = %v, want 0.0025", res.CostUSD)
	}
	if res.FilePath != "" || res.FilePrefix != "" || res.FileExt != "" || res.Turn2 != 0 {
		t.Errorf("a text request reports file or turn-2 data: %+v", res)
	}
	if res.Startup <= 0 || res.Turn1 <= 0 || res.Total < res.Startup+res.Turn1 {
		t.Errorf("durations inconsistent: startup %v turn1 %v total %v", res.Startup, res.Turn1, res.Total)
	}
	if res.UnknownEvents != 0 {
		t.Errorf("UnknownEvents = %d", res.UnknownEvents)
	}
	// The working directory stays where existing sessions were created.
	if info, err := os.Stat(filepath.Join(e.data, "claude", "bot-test")); err != nil || info.Mode().Perm() != 0o750 {
		t.Errorf("working directory not created 0750: %v %v", info, err)
	}
}

func TestResume(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Text, "first")
	e.mustRun(t, req)
	req.Prompt, req.Resume = "second", true
	res := e.mustRun(t, req)
	if res.Text != "You said: second (message 2)" {
		t.Errorf("Text = %q, want the second message of the same session", res.Text)
	}
}

func TestResumeUnknownSession(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Text, "hello")
	req.Resume = true
	_, err := e.run(t, req)
	if !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("err = %v, want ErrSessionNotFound", err)
	}
	var re *resultError
	if !errors.As(err, &re) || re.Subtype != "error_during_execution" || !strings.Contains(re.StderrTail, "No conversation found") {
		t.Errorf("err = %#v, want a *resultError with the stderr tail", re)
	}
}

// The CLI says why it failed on stderr after its result line, and the
// admin's log line (the error's text) must carry those words. The fake
// holds its stderr line back until its stdin is closed, so an error
// assembled when the result line arrives would miss it every time.
func TestFailedStartErrorWaitsForStderr(t *testing.T) {
	tests := []struct {
		name, env string
		resume    bool
		want      string
	}{
		{"unknown session", "", true, "stderr: No conversation found with session ID"},
		{"startup error", claudetest.StartupErrorEnv + "=MCP config could not be read", false, "stderr: Error: MCP config could not be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			e.d.cfg.Env = append(e.d.cfg.Env, claudetest.HoldStderrEnv+"=1")
			if tt.env != "" {
				e.d.cfg.Env = append(e.d.cfg.Env, tt.env)
			}
			req := e.request(Text, "hello")
			req.Resume = tt.resume
			_, err := e.run(t, req)
			var re *resultError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a *resultError whose text ends with %q", err, tt.want)
			}
			if tt.resume != errors.Is(err, ErrSessionNotFound) {
				t.Errorf("errors.Is(err, ErrSessionNotFound) = %v, want %v", !tt.resume, tt.resume)
			}
		})
	}
}

// A resume that fails at start for another reason keeps its session: the
// bot must not throw away a conversation that still exists.
func TestResumeStartupErrorIsNotUnknownSession(t *testing.T) {
	e := newFakeEnv(t)
	e.d.cfg.Env = append(e.d.cfg.Env, claudetest.StartupErrorEnv+"=MCP config could not be read")
	req := e.request(Text, "hello")
	req.Resume = true
	_, err := e.run(t, req)
	var re *resultError
	if !errors.As(err, &re) || re.Subtype != "error_during_execution" || errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("err = %v, want a *resultError that is not ErrSessionNotFound", err)
	}
}

func TestResultError(t *testing.T) {
	e := newFakeEnv(t)
	_, err := e.run(t, e.request(Text, "#fail please"))
	var re *resultError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want *resultError", err)
	}
	if re.Subtype != "success" || !strings.HasPrefix(re.Message, "API Error: 400") {
		t.Errorf("resultError = %+v", re)
	}
	// The CLI's subtype "success" of a failed turn is not repeated as if
	// the failure were one.
	if got := re.Error(); !strings.HasPrefix(got, "claude: turn failed (is_error): API Error: 400") {
		t.Errorf("error text = %q", got)
	}
	if errors.Is(err, ErrSessionNotFound) {
		t.Error("an API error on a new session reported as ErrSessionNotFound")
	}
}

// A speech request whose turn 1 failed has no words to fall back to: its
// text is the CLI's error, not the persona's answer (Answered false). One
// whose turn 2 failed has them (Answered true).
func TestSpeechFailureSaysWhetherTurnOneAnswered(t *testing.T) {
	e := newFakeEnv(t)
	res, err := e.run(t, e.request(Speech, "#fail please"))
	if err == nil || res == nil || res.Answered {
		t.Errorf("turn 1 failed: %+v, %v; want an error and Answered false", res, err)
	}
	res, err = e.run(t, e.request(Speech, "say it #notool"))
	if !errors.Is(err, ErrToolNotCalled) || res == nil || !res.Answered || res.Text != "You said: say it #notool" {
		t.Errorf("turn 2 failed: %+v, %v; want ErrToolNotCalled with turn 1's words, Answered", res, err)
	}
}

// trickyText must survive the trip into turn 2's JSON arguments.
const trickyText = "He said \"hi\"\nthen left.\\ Odd: \"} {\"text\":\"x\"} \t ünïcödé </script> \u2028"

func TestSpeechTwoTurn(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Speech, trickyText)
	res := e.mustRun(t, req)
	if res.Text != "You said: "+trickyText {
		t.Errorf("Text = %q", res.Text)
	}
	checkFile(t, res, filepath.Join(e.data, "audio-output"), `^bot-test-user-42-\d{13}$`, ".mp3")
	if res.Turn2 <= 0 || res.CostUSD != 2*0.0025 {
		t.Errorf("Turn2 %v, CostUSD %v: want both turns counted", res.Turn2, res.CostUSD)
	}
	// Usage is per turn (cost is a running total): the request's is the sum.
	if want := (Tokens{Input: 24, Output: 68}); res.Tokens != want {
		t.Errorf("Tokens = %+v, want %+v, both turns' usage", res.Tokens, want)
	}
}

// With Config.Speak the answer is spoken from turn one's text, whatever
// the tool call carries, and the file is handed to OnFile before turn
// two's end.
func TestSpeechSpokenWhileWritingGoesOutAtTheToolsReport(t *testing.T) {
	var speaker *mcp.Speaker
	e := newFakeEnvWith(t, func(cfg *Config) {
		// The speaker needs the tool server's OpenAI stand-in: made below.
		cfg.Speak = func(ctx context.Context, s toolspec.SpeechSettings) Utterance { return speaker.Begin(ctx, s) }
	})
	oc := openai.DefaultConfig("sk-test")
	oc.BaseURL = e.tools.OpenAI.URL
	speaker = mcp.NewSpeaker(mcp.Config{DataDir: e.data, OpenAI: oc})
	req := e.request(Speech, "Once upon a time. There was a bot.")
	var early *Result
	req.OnFile = func(res *Result) {
		if early != nil {
			t.Error("OnFile called twice")
		}
		early = res
	}
	res := e.mustRun(t, req)
	if early == nil || early.FilePath != res.FilePath || res.FilePath == "" {
		t.Fatalf("OnFile got %+v; the request's file %q", early, res.FilePath)
	}
	if early.SpokenChars != res.SpokenChars || !slices.ContainsFunc(early.ToolCalls, func(c ToolCall) bool { return c.Tool == toolspec.SpeechToolName }) {
		t.Errorf("OnFile got %d characters spoken and the calls %+v: want all of it, and the call that made the file", early.SpokenChars, early.ToolCalls)
	}
	if early.CostUSD >= res.CostUSD {
		t.Errorf("OnFile's cost %v, the request's %v: want OnFile before turn two's end", early.CostUSD, res.CostUSD)
	}
	var spoken []string
	for _, r := range e.tools.OpenAI.Requests() {
		spoken = append(spoken, r.Input)
	}
	if strings.Join(spoken, " ") != res.Text || res.SpokenChars != utf8.RuneCountInString(res.Text) {
		t.Errorf("spoken %q (%d characters), want turn one's text %q", spoken, res.SpokenChars, res.Text)
	}
}

func TestSpeechOpus(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Speech, "hello")
	req.Speech.Format = "opus"
	res := e.mustRun(t, req)
	checkFile(t, res, filepath.Join(e.data, "audio-output"), `^bot-test-user-42-\d{13}$`, ".ogg")
}

func TestImageTwoTurn(t *testing.T) {
	e := newFakeEnv(t)
	res := e.mustRun(t, e.request(Image, "draw a cat"))
	checkFile(t, res, filepath.Join(e.data, "image-output"), `^bot-test-user-42-\d{13}$`, ".png")
	f, err := os.Open(res.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("image is not a PNG: %v", err)
	}
}

func TestImageWithEmptyTurn1(t *testing.T) {
	e := newFakeEnv(t)
	res := e.mustRun(t, e.request(Image, "#empty draw"))
	if res.Text != "" || res.FilePath == "" {
		t.Errorf("Text %q FilePath %q: want no text and a file", res.Text, res.FilePath)
	}
}

// checkFile asserts the tool's file exists in dir and is named
// <prefix>-<ms><ext> with the prefix the driver reported.
func checkFile(t *testing.T, res *Result, dir, prefixPattern, ext string) {
	t.Helper()
	if !regexp.MustCompile(prefixPattern).MatchString(res.FilePrefix) || res.FileExt != ext {
		t.Errorf("FilePrefix %q FileExt %q", res.FilePrefix, res.FileExt)
	}
	if filepath.Dir(res.FilePath) != dir {
		t.Errorf("FilePath %q not in %s", res.FilePath, dir)
	}
	name := filepath.Base(res.FilePath)
	if !strings.HasPrefix(name, res.FilePrefix+"-") || !strings.HasSuffix(name, ext) {
		t.Errorf("file %q does not match prefix %q and extension %q", name, res.FilePrefix, ext)
	}
	if info, err := os.Stat(res.FilePath); err != nil || info.Size() == 0 {
		t.Errorf("file not written: %v", err)
	}
}

func TestTurn2PromptQuotesSafely(t *testing.T) {
	req := Request{Mode: Speech, FilePrefix: "bot-b-user-1-2", Speech: toolspec.SpeechSettings{Voice: "nova", Speed: 1.25, Model: "tts-1", Format: "opus"}}
	prompt, err := turn2Prompt(req, trickyText, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prompt, toolspec.SpeechTool) || !strings.Contains(prompt, "Only call the tool, no additional response") {
		t.Errorf("prompt does not ask for the tool alone:\n%s", prompt)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(argsLine(t, prompt)), &args); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"text": trickyText, "voice": "nova", "speed": 1.25, "model": "tts-1", "format": "opus",
		"filename": "bot-b-user-1-2", "include_base64": false}
	if !mapsEqual(args, want) {
		t.Errorf("speech arguments\n got %v\nwant %v", args, want)
	}

	// Spoken while turn one streamed: the model need not write the text
	// again.
	prompt, err = turn2Prompt(req, trickyText, true)
	if err != nil {
		t.Fatal(err)
	}
	args = nil
	if err := json.Unmarshal([]byte(argsLine(t, prompt)), &args); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"text": spokenStandIn, "filename": "bot-b-user-1-2"}; !mapsEqual(args, want) {
		t.Errorf("spoken speech arguments\n got %v\nwant %v", args, want)
	}

	req = Request{Mode: Image, FilePrefix: "bot-b-user-1-2", Image: toolspec.ImageSettings{Model: "dall-e-2", Size: "256x256"}}
	prompt, err = turn2Prompt(req, "", false)
	if err != nil {
		t.Fatal(err)
	}
	args = nil
	if err := json.Unmarshal([]byte(argsLine(t, prompt)), &args); err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"model": "dall-e-2", "size": "256x256", "filename": "bot-b-user-1-2", "include_base64": false}
	if !mapsEqual(args, want) || !strings.Contains(prompt, toolspec.ImageTool) || !strings.Contains(prompt, `"prompt"`) {
		t.Errorf("image arguments %v in\n%s", args, prompt)
	}
}

func argsLine(t *testing.T, prompt string) string {
	t.Helper()
	for _, line := range strings.Split(prompt, "\n") {
		if strings.HasPrefix(line, "{") {
			return line
		}
	}
	t.Fatalf("no arguments line in\n%s", prompt)
	return ""
}

func mapsEqual(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestSpeechNothingToSpeak(t *testing.T) {
	e := newFakeEnv(t)
	res, err := e.run(t, e.request(Speech, "#empty"))
	if !errors.Is(err, errNothingToSpeak) {
		t.Fatalf("err = %v, want errNothingToSpeak", err)
	}
	if res.Turn2 != 0 {
		t.Error("turn 2 ran")
	}
	if _, err := os.Stat(filepath.Join(e.data, "audio-output")); !os.IsNotExist(err) {
		t.Errorf("audio-output exists: turn 2 ran (%v)", err)
	}
}

func TestToolError(t *testing.T) {
	e := newFakeEnv(t)
	res, err := e.run(t, e.request(Speech, "#toolerror hi"))
	var te *toolError
	if !errors.As(err, &te) || te.Tool != toolspec.SpeechTool || !strings.Contains(te.Message, "500") {
		t.Fatalf("err = %v, want *toolError for %s", err, toolspec.SpeechTool)
	}
	if res == nil || res.Text != "You said: #toolerror hi" {
		t.Errorf("the turn-1 text is lost on a tool error: %+v", res)
	}
}

func TestToolNotCalled(t *testing.T) {
	e := newFakeEnv(t)
	_, err := e.run(t, e.request(Image, "#notool draw"))
	if !errors.Is(err, ErrToolNotCalled) {
		t.Fatalf("err = %v, want ErrToolNotCalled", err)
	}
}

func TestToolDenied(t *testing.T) {
	e := newFakeEnv(t)
	_, err := e.run(t, e.request(Image, "#denied draw"))
	if !errors.Is(err, errToolDenied) {
		t.Fatalf("err = %v, want errToolDenied", err)
	}
}

func TestExitMidStream(t *testing.T) {
	e := newFakeEnv(t)
	_, err := e.run(t, e.request(Text, "#exit"))
	var ee *exitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(ee.StderrTail, "simulated crash") {
		t.Fatalf("err = %v, want *exitError with status 3 and the stderr tail", err)
	}
}

func TestInactivityWatchdog(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Text, "#hang")
	req.InactivityTimeout = 500 * time.Millisecond
	_, err := e.run(t, req)
	var te *timeoutError
	if !errors.As(err, &te) || !te.Inactivity || !errors.Is(err, errTimeout) {
		t.Fatalf("err = %v, want an inactivity *timeoutError", err)
	}
}

func TestMaxDuration(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Text, "#hang")
	req.MaxDuration = 500 * time.Millisecond
	_, err := e.run(t, req)
	var te *timeoutError
	if !errors.As(err, &te) || te.Inactivity || te.After != req.MaxDuration || !errors.Is(err, errTimeout) {
		t.Fatalf("err = %v, want an overall *timeoutError", err)
	}
}

// The CLI ignores SIGTERM: the group is killed after the grace period and
// checkNoLeaks proves nothing survives.
func TestIgnoresSIGTERM(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Text, "#ignoreterm")
	req.InactivityTimeout = 300 * time.Millisecond
	_, err := e.run(t, req)
	if !errors.Is(err, errTimeout) {
		t.Fatalf("err = %v, want errTimeout", err)
	}
}

// A grandchild keeps the stdout pipe open: the request still ends with the
// timeout, and the grandchild dies with the group.
func TestGrandchildHoldsStdout(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Text, "#grandchild")
	req.InactivityTimeout = 500 * time.Millisecond
	_, err := e.run(t, req)
	if !errors.Is(err, errTimeout) {
		t.Fatalf("err = %v, want errTimeout", err)
	}
}

func TestGarbageLine(t *testing.T) {
	e := newFakeEnv(t)
	_, err := e.run(t, e.request(Text, "#garbage"))
	var pe *streamjson.ProtocolError
	if !errors.As(err, &pe) || pe.Line != 2 {
		t.Fatalf("err = %v, want *streamjson.ProtocolError on line 2", err)
	}
}

func TestUnknownEventsSkipped(t *testing.T) {
	e := newFakeEnv(t)
	res := e.mustRun(t, e.request(Text, "#unknown"))
	if res.UnknownEvents != 4 || res.Text != "You said: #unknown" {
		t.Errorf("UnknownEvents %d Text %q: want 4 skipped events and the reply", res.UnknownEvents, res.Text)
	}
	// The admin's line says so, its durations in the _ms unit the docs
	// promise.
	done := e.logs.FilterMessage("claude request done").All()
	if len(done) != 1 {
		t.Fatalf("%d lines claude request done, want 1", len(done))
	}
	fields := done[0].ContextMap()
	for _, key := range []string{"startup_ms", "turn1_ms", "turn2_ms", "total_ms"} {
		if _, ok := fields[key].(time.Duration); !ok {
			t.Errorf("claude request done lacks the duration %s: %v", key, fields)
		}
	}
	if fields["unknown_events"] != int64(4) {
		t.Errorf("unknown_events = %v, want 4", fields["unknown_events"])
	}
}

func TestLongReply(t *testing.T) {
	e := newFakeEnv(t)
	res := e.mustRun(t, e.request(Text, "#long"))
	if len(res.Text) != 6000 || !strings.Contains(res.Text, "\n\n") {
		t.Errorf("reply of %d characters, want 6000 in paragraphs", len(res.Text))
	}
}

func TestCLINotFound(t *testing.T) {
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "claude")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, command := range []string{filepath.Join(dir, "missing"), "brainbot-no-such-claude-cli", notExecutable} {
		e := newFakeEnv(t)
		e.d.cfg.Command = command
		if _, err := e.run(t, e.request(Text, "hi")); !errors.Is(err, cliproc.ErrNotFound) {
			t.Errorf("%s: err = %v, want cliproc.ErrNotFound", command, err)
		}
	}
}

func TestContextCancel(t *testing.T) {
	e := newFakeEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel once the CLI is certainly running: its session file exists.
	req := e.request(Text, "#hang")
	go func() {
		defer cancel()
		session := filepath.Join(e.data, "claude", "bot-test", ".fake-sessions", req.SessionID)
		for range 1000 {
			if _, err := os.Stat(session); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := e.d.Run(ctx, req)
	if !errors.Is(err, context.Canceled) || errors.Is(err, errTimeout) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestConcurrentRequests(t *testing.T) {
	e := newFakeEnv(t)
	var wg sync.WaitGroup
	results := make([]*Result, 3)
	errs := make([]error, 3)
	reqs := make([]Request, 3)
	for i := range reqs {
		reqs[i] = e.request(Speech, "#slow number "+string(rune('A'+i)))
		reqs[i].FilePrefix = output.Prefix("test", int64(i), time.Now())
		wg.Go(func() { results[i], errs[i] = e.run(t, reqs[i]) })
	}
	wg.Wait()
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if res.SessionID != reqs[i].SessionID || !strings.HasSuffix(res.Text, string(rune('A'+i))) {
			t.Errorf("request %d got another request's result: %+v", i, res)
		}
	}
}

// BenchmarkDriverOverhead is one trivial text request through the fake
// CLI: spawn, one turn, exit. It is the driver's own cost per request
// (process start, pipes, parsing, teardown), for comparisons over time.
func BenchmarkDriverOverhead(b *testing.B) {
	data := b.TempDir()
	tools := toolstest.Start(b, data, nil)
	d, err := New(Config{Command: os.Args[0], DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets, Env: claudetest.FakeCLIEnv()})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	b.ReportAllocs()
	for b.Loop() {
		_, err := d.Run(context.Background(), Request{
			Mode: Text, Prompt: "hello", SessionID: uuid.NewString(), SystemPrompt: "bench",
			BotID: "bench",
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// Claude may call a tool on its own in turn 1, with arguments of its
// choosing: the tool server refuses that call (OpenAI never sees it), and
// turn 2's call is served with the request's settings.
func TestTurn1ToolCallRefused(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Speech, "#calltool hi")
	res := e.mustRun(t, req)
	checkFile(t, res, filepath.Join(e.data, "audio-output"), `^bot-test-user-42-\d{13}$`, ".mp3")
	reqs := e.tools.OpenAI.Requests()
	if len(reqs) != 1 || reqs[0].Voice != req.Speech.Voice || reqs[0].Speed != req.Speech.Speed || reqs[0].Input != res.Text {
		t.Errorf("OpenAI saw %+v; want only turn 2's call, with the request's settings", reqs)
	}

	_, err := e.run(t, e.request(Image, "#calltool #notool draw"))
	if !errors.Is(err, ErrToolNotCalled) {
		t.Errorf("err = %v, want ErrToolNotCalled although turn 1 called the tool", err)
	}
	if n := len(e.tools.OpenAI.Requests()); n != 1 {
		t.Errorf("OpenAI saw %d calls, want still 1", n)
	}
}

// The CLI's environment is built from Config.Environ, brainbot's
// environment with its env file's variables (run -env-file), not from
// the process's alone: credentials only in the file reach the CLI, and
// what the file does not give is not taken from the process.
func TestCLIEnvComesFromConfigEnviron(t *testing.T) {
	t.Setenv("ANTHROPIC_BASE_URL", "http://process-only.example")
	e := newFakeEnv(t)
	e.d.cfg.Environ = []string{"PATH=" + os.Getenv("PATH"), "ANTHROPIC_API_KEY=sk-ant-from-the-env-file"}
	env := envOf(t, e, "test")
	if env["ANTHROPIC_API_KEY"] != "sk-ant-from-the-env-file" {
		t.Errorf("ANTHROPIC_API_KEY = %q, want Config.Environ's", env["ANTHROPIC_API_KEY"])
	}
	if v, ok := env["ANTHROPIC_BASE_URL"]; ok {
		t.Errorf("ANTHROPIC_BASE_URL = %q, taken from the process, not Config.Environ", v)
	}
}

// A brain's memory puts brainbot's memory server in the process's MCP
// config and the tools the request names in the allow-list: fixed at the
// spawn, as the question tool is. Whose notes they keep is not in either: it comes
// with each request (Request.Notes), through the process's ticket.
func TestMemoryToolsOffered(t *testing.T) {
	e := newFakeEnv(t)
	req := Request{Mode: Text, SessionID: "s", Memory: true, Notes: ticket.Memory{Bot: "friend", User: 7, MaxNotes: 3, MaxNoteChars: 50},
		AllowedTools: []string{toolspec.RememberTool, toolspec.ForgetNoteTool}}
	path, err := e.d.writeMCPConfig("tok123", req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	os.Remove(path)
	server := `"` + toolspec.MemoryServer + `":{"type":"http","url":"` + e.tools.URL + `/` + toolspec.MemoryServer + `","headers":{"Authorization":"Bearer tok123"}}`
	if !strings.Contains(string(data), server) || strings.Contains(string(data), "friend") {
		t.Errorf("MCP config %s: want %s, and no scope", data, server)
	}
	got := e.d.args(req, path)
	if i := slices.Index(got, "--allowedTools"); i < 0 || !strings.HasSuffix(got[i+1], ","+toolspec.RememberTool+","+toolspec.ForgetNoteTool) {
		t.Errorf("allowed tools: args %q", got)
	}
	// A brain with reminders and no notes: the server, but no note tool.
	schedule := Request{Mode: Text, SessionID: "s", Memory: true, AllowedTools: []string{toolspec.RemindTool}}
	if got := e.d.args(schedule, path); slices.ContainsFunc(got, func(a string) bool { return strings.Contains(a, toolspec.RememberTool) }) {
		t.Errorf("the note tools allowed to a request that names none: args %q", got)
	}
	req.Memory, req.AllowedTools = false, nil
	if data := e.d.args(req, path); slices.ContainsFunc(data, func(a string) bool { return strings.Contains(a, toolspec.MemoryServer) }) {
		t.Errorf("without memory: args %q", data)
	}
	if e.d.fingerprint(req) == e.d.fingerprint(Request{Mode: Text, SessionID: "s", Memory: true}) {
		t.Error("a brain with memory and one without share a fingerprint: a spare of one would serve the other")
	}
}
