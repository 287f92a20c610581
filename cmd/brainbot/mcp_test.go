package main

import (
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

var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
)

// brainbotBinary builds cmd/brainbot once per test run: tests that need
// the program as a separate process (the Claude CLI starts our MCP servers
// that way) share it.
func brainbotBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "brainbot-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBinary = filepath.Join(dir, "brainbot")
		out, err := exec.Command("go", "build", "-o", builtBinary, ".").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("building brainbot: %v", buildErr)
	}
	return builtBinary
}

// TestMain removes the binary brainbotBinary built: 20 MB per run would
// otherwise pile up in the temp folder.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtBinary != "" {
		_ = os.RemoveAll(filepath.Dir(builtBinary)) // best effort: the run's result stands
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
