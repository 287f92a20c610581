package main

import (
	"brainbot/claude/claudetest"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"brainbot/mcp/openaitest"
)

// Programs the tests run as separate processes, built once per test run
// into one temporary folder that TestMain removes.
var (
	binDirOnce sync.Once
	binDir     string
	binDirErr  error
	binaries   sync.Map // package path → *builtBinary
)

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// goBinary builds the package pkg (a path relative to this folder) once
// per test run and returns the program's path.
func goBinary(t testing.TB, pkg, name string) string {
	t.Helper()
	binDirOnce.Do(func() { binDir, binDirErr = os.MkdirTemp("", "brainbot-bin-") })
	if binDirErr != nil {
		t.Fatal(binDirErr)
	}
	v, _ := binaries.LoadOrStore(pkg, &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, name)
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = &buildError{err, string(out)}
		}
	})
	if b.err != nil {
		t.Fatalf("building %s: %v", pkg, b.err)
	}
	return b.path
}

// brainbotBinary is this program: tests that need it as a separate process
// (the Claude CLI starts our MCP servers that way) share it.
func brainbotBinary(t testing.TB) string { return goBinary(t, ".", "brainbot") }

// toolServerBinary is the MCP server of the brain-tools tests
// (testdata/toolserver): tools that answer, fail, sleep or read their
// environment.
func toolServerBinary(t testing.TB) string { return goBinary(t, "./testdata/toolserver", "toolserver") }

// TestMain removes the programs the tests built: 20 MB per run would
// otherwise pile up in the temp folder.
func TestMain(m *testing.M) {
	// The cluster tests run this binary as the fake Claude CLI, and the
	// in-process ones (runMain) as brainbot's launcher of MCP servers.
	claudetest.RunFakeCLIIfRequested()
	// TestWebhookEndpointClosesIdleConnections runs it as its attacker.
	runIdleClientIfRequested()
	// TestEndToEndOnlyTheAdminGetsIn runs it as another account's dialer.
	runDialerIfRequested()
	if len(os.Args) > 2 && os.Args[1] == "mcp" && os.Args[2] == "exec" {
		os.Exit(newMain().Run(context.Background(), os.Args[1:]))
	}
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir) // best effort: the run's result stands
	}
	os.Exit(code)
}

type buildError struct {
	err    error
	output string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.output }

// The tts server as the Claude CLI meets it: a separate brainbot process
// speaking JSON-RPC on stdio, configured only through its environment.
func TestMCPServerProcess(t *testing.T) {
	bin := brainbotBinary(t)
	openAI := openaitest.NewServer()
	defer openAI.Close()
	data := t.TempDir()
	const key = "sk-process-test-key-123456"

	c, err := client.NewStdioMCPClient(bin, []string{
		"BRAINBOT_DATA=" + data, "OPENAI_API_KEY=" + key, "OPENAI_BASE_URL=" + openAI.URL,
	}, "mcp", "tts")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var initReq mcpgo.InitializeRequest
	initReq.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	initReq.Params.ClientInfo = mcpgo.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, initReq); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "text_to_speech" {
		t.Fatalf("tools/list = %+v, %v; want exactly text_to_speech", tools, err)
	}

	var call mcpgo.CallToolRequest
	call.Params.Name = "text_to_speech"
	call.Params.Arguments = map[string]any{"text": "Hello there.", "voice": "nova", "filename": "bot-narrator-user-42-1700000000000"}
	res, err := c.CallTool(ctx, call)
	if err != nil || res.IsError {
		t.Fatalf("tools/call = %+v, %v", res, err)
	}
	var out struct {
		Success   bool   `json:"success"`
		AudioPath string `json:"audio_path"`
	}
	text := res.Content[0].(mcpgo.TextContent).Text
	if err := json.Unmarshal([]byte(text), &out); err != nil || !out.Success {
		t.Fatalf("result %q: %v", text, err)
	}
	if dir := filepath.Join(data, "audio-output"); filepath.Dir(out.AudioPath) != dir ||
		!strings.HasPrefix(filepath.Base(out.AudioPath), "bot-narrator-user-42-1700000000000-") {
		t.Errorf("audio_path = %s, want bot-narrator-user-42-1700000000000-<ms>.mp3 in %s", out.AudioPath, dir)
	}
	if b, err := os.ReadFile(out.AudioPath); err != nil || len(b) == 0 {
		t.Errorf("audio file: %d bytes, %v", len(b), err)
	}
	if reqs := openAI.Requests(); len(reqs) != 1 || reqs[0].Input != "Hello there." {
		t.Errorf("OpenAI saw %+v", reqs)
	}
}

// mcp exec needs the command to run; a command it cannot find is an error
// naming it.
func TestMCPExecUsage(t *testing.T) {
	if code, _, stderr := runMain(t, nil, "mcp", "exec"); code != exitUsage || !strings.Contains(stderr, "want the command to run") {
		t.Errorf("mcp exec without a command: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr := runMain(t, []string{"PATH=/nonexistent"}, "mcp", "exec", "-keep", "KEY", "--", "no-such-server")
	if code != exitError || !strings.Contains(stderr, `"no-such-server" is not in PATH`) {
		t.Errorf("mcp exec of a missing command: exit %d, stderr %q", code, stderr)
	}
}
