package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"brainbot/mcp/audio"
	"brainbot/toolspec"
)

// rpc talks newline-delimited JSON-RPC to a server under test.
type rpc struct {
	t   *testing.T
	w   io.Writer
	r   *bufio.Scanner
	ids int
}

func (c *rpc) send(method string, params any, notify bool) {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if !notify {
		c.ids++
		msg["id"] = c.ids
	}
	b, _ := json.Marshal(msg)
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rpc) call(method string, params any, result any) {
	c.t.Helper()
	c.send(method, params, false)
	if !c.r.Scan() {
		c.t.Fatalf("%s: no answer: %v", method, c.r.Err())
	}
	var resp struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct{ Message string }
	}
	if err := json.Unmarshal(c.r.Bytes(), &resp); err != nil {
		c.t.Fatalf("%s: %q: %v", method, c.r.Bytes(), err)
	}
	if resp.Error != nil || resp.ID != c.ids {
		c.t.Fatalf("%s: id %d error %+v", method, resp.ID, resp.Error)
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		c.t.Fatalf("%s result: %v", method, err)
	}
}

// The servers speak MCP over plain streams: initialize, list, call.
func TestServeOverStreams(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		name, tool string
		args       map[string]any
		pathKey    string
	}{
		{"tts", "text_to_speech", map[string]any{"text": "Hello from the wire.", "filename": "wire"}, "audio_path"},
		{"image-gen", "generate_image", map[string]any{"prompt": "a wire", "size": "256x256", "filename": "wire"}, "image_path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewTTSServer(f.cfg)
			if tt.name == "image-gen" {
				s = NewImageServer(f.cfg)
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, s, inR, outW, f.cfg.Log); outW.Close() }()
			defer func() {
				inW.Close() // end of input ends Serve
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("Serve: %v", err)
					}
				case <-time.After(time.Minute): // hang guard
					t.Error("Serve did not return")
				}
			}()
			sc := bufio.NewScanner(outR)
			sc.Buffer(nil, 16<<20)
			c := &rpc{t: t, w: inW, r: sc}

			var init struct {
				ServerInfo struct{ Name string } `json:"serverInfo"`
			}
			c.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "test", "version": "1"}}, &init)
			if init.ServerInfo.Name != tt.name {
				t.Errorf("server name %q, want %q", init.ServerInfo.Name, tt.name)
			}
			c.send("notifications/initialized", nil, true)

			var list struct{ Tools []struct{ Name string } }
			c.call("tools/list", nil, &list)
			if len(list.Tools) != 1 || list.Tools[0].Name != tt.tool {
				t.Errorf("tools %+v, want only %s", list.Tools, tt.tool)
			}

			var res struct {
				IsError bool `json:"isError"`
				Content []struct{ Text string }
			}
			c.call("tools/call", map[string]any{"name": tt.tool, "arguments": tt.args}, &res)
			if res.IsError || len(res.Content) != 1 {
				t.Fatalf("tools/call: %+v", res)
			}
			var out map[string]any
			if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil || out["success"] != true {
				t.Fatalf("result %q: %v", res.Content[0].Text, err)
			}
			path, _ := out[tt.pathKey].(string)
			if !strings.HasPrefix(filepath.Base(path), "wire-") {
				t.Errorf("%s = %q", tt.pathKey, path)
			}
		})
	}
}

// The process test: the test binary runs itself as the tts server (as
// `brainbot mcp tts` will) and a real stdio MCP client talks to it.
// helperTimeoutEnv is the server's OpenAI timeout.
const (
	helperEnv        = "BRAINBOT_MCP_TEST_HELPER"
	helperTimeoutEnv = "BRAINBOT_MCP_TEST_TIMEOUT"
)

func TestHelperProcess(t *testing.T) {
	kind := os.Getenv(helperEnv)
	if kind == "" {
		t.Skip("runs only as the helper process")
	}
	log, err := zap.NewDevelopment() // stderr: stdout carries JSON-RPC
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	oc := openai.DefaultConfig(os.Getenv("OPENAI_API_KEY"))
	oc.BaseURL = os.Getenv("OPENAI_BASE_URL")
	timeout, err := time.ParseDuration(os.Getenv(helperTimeoutEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg := Config{DataDir: os.Getenv("BRAINBOT_DATA"), OpenAI: oc, Timeout: timeout, Log: log}
	s := NewTTSServer(cfg)
	if kind == "image-gen" {
		s = NewImageServer(cfg)
	}
	if err := Serve(context.Background(), s, os.Stdin, os.Stdout, log); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func TestStdioProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
	defer cancel()
	// Only the timeout case gets a short deadline, in a server of its own:
	// on a loaded machine an ordinary call can take longer than any short
	// one.
	c := startHelper(ctx, t, f, time.Minute)
	var req mcpgo.CallToolRequest
	req.Params.Name = "text_to_speech"
	req.Params.Arguments = map[string]any{"text": "A voice reply from another process.", "filename": "bot-a-user-7-1"}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var sr toolspec.SpeechResult
	success(t, res, &sr)
	assertInside(t, filepath.Join(f.cfg.DataDir, "audio-output"), sr.AudioPath)
	data, err := os.ReadFile(sr.AudioPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audio.ParseMP3(data); err != nil {
		t.Errorf("not an MP3: %v", err)
	}

	slow := startHelper(ctx, t, f, 300*time.Millisecond)
	for directive, tt := range map[string]struct {
		c    *client.Client
		want string
	}{
		"#openai-429":  {c, "openai: 429 rate limited"},
		"#openai-slow": {slow, "openai: timed out after 300ms"},
	} {
		req.Params.Arguments = map[string]any{"text": "fail " + directive}
		res, err := tt.c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if msg := failure(t, res); !strings.HasPrefix(msg, tt.want) {
			t.Errorf("%s: %q, want prefix %q", directive, msg, tt.want)
		}
	}
	// The servers survived the failures.
	for _, c := range []*client.Client{c, slow} {
		req.Params.Arguments = map[string]any{"text": "Still here."}
		if res, err = c.CallTool(ctx, req); err != nil {
			t.Fatal(err)
		}
		success(t, res, &sr)
	}
}

// startHelper starts the test binary as the tts server with this OpenAI
// timeout, and a stdio MCP client for it, initialized.
func startHelper(ctx context.Context, t *testing.T, f *fixture, timeout time.Duration) *client.Client {
	t.Helper()
	env := append(os.Environ(), helperEnv+"=tts", helperTimeoutEnv+"="+timeout.String(), "OPENAI_API_KEY="+testKey,
		"OPENAI_BASE_URL="+f.oa.URL, "BRAINBOT_DATA="+f.cfg.DataDir)
	c, err := client.NewStdioMCPClient(os.Args[0], env, "-test.run=^TestHelperProcess$")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var initReq mcpgo.InitializeRequest
	initReq.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	initReq.Params.ClientInfo = mcpgo.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, initReq); err != nil {
		t.Fatal(err)
	}
	return c
}
