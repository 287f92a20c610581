package claudetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"brainbot/toolspec"
)

// streamed is a response reassembled from its server-sent events.
type streamed struct {
	events     []string // event names in order
	text       string
	toolName   string
	toolInput  map[string]any
	stopReason string
}

func userMsg(blocks ...any) map[string]any {
	return map[string]any{"role": "user", "content": blocks}
}

func textPart(s string) map[string]string { return map[string]string{"type": "text", "text": s} }

func post(t *testing.T, m *Model, path string, body map[string]any) *http.Response {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(m.URL+path, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// ask sends a streaming request with these messages and reassembles the
// answer, checking the events come in the API's order.
func ask(t *testing.T, m *Model, messages ...any) streamed {
	t.Helper()
	resp := post(t, m, "/v1/messages?beta=true", map[string]any{
		"model": "claude-test", "stream": true, "max_tokens": 1000,
		"system": []any{textPart("be brief")}, "messages": messages,
	})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var s streamed
	var partialJSON strings.Builder
	var event string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			s.events = append(s.events, event)
		case strings.HasPrefix(line, "data: "):
			var data struct {
				Type         string
				ContentBlock struct{ Type, Name string } `json:"content_block"`
				Delta        struct {
					Type        string
					Text        string
					PartialJSON string `json:"partial_json"`
					StopReason  string `json:"stop_reason"`
				}
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data); err != nil {
				t.Fatalf("event %s: %v", event, err)
			}
			if data.Type != event {
				t.Fatalf("event %q carries type %q", event, data.Type)
			}
			switch {
			case event == "content_block_start" && data.ContentBlock.Type == "tool_use":
				s.toolName = data.ContentBlock.Name
			case data.Delta.Type == "text_delta":
				s.text += data.Delta.Text
			case data.Delta.Type == "input_json_delta":
				partialJSON.WriteString(data.Delta.PartialJSON)
			case event == "message_delta":
				s.stopReason = data.Delta.StopReason
			}
		}
	}
	if s.toolName != "" {
		if err := json.Unmarshal([]byte(partialJSON.String()), &s.toolInput); err != nil {
			t.Fatalf("tool input %q: %v", partialJSON.String(), err)
		}
	}
	want := []string{"message_start", "ping", "content_block_start"}
	if len(s.events) < 6 || !slices.Equal(s.events[:3], want) ||
		!slices.Equal(s.events[len(s.events)-3:], []string{"content_block_stop", "message_delta", "message_stop"}) {
		t.Fatalf("events out of order: %v", s.events)
	}
	return s
}

const speechRequest = `Please use the mcp__tts__text_to_speech tool with exactly these arguments:
{"text":"He said \"hi\"\nand left","voice":"nova","speed":1.25,"filename":"bot-a-user-1-100","include_base64":false}
Only call the tool.`

const imageRequest = `Please use the mcp__image-gen__generate_image tool with these arguments: {"model":"dall-e-2","size":"256x256","filename":"bot-a-user-1-100","include_base64":false}`

// "#owntool" calls each of our file tools the request offers, in one
// message, with costly settings of its own; turn 2 asks for them too.
func TestModelOwnToolCalls(t *testing.T) {
	m := NewModel()
	defer m.Close()
	tools := []any{map[string]any{"name": toolspec.SpeechTool}, map[string]any{"name": toolspec.ImageTool}, map[string]any{"name": "Other"}}
	resp := post(t, m, "/v1/messages", map[string]any{
		"model": "claude-test", "max_tokens": 1000, "tools": tools,
		"messages": []any{userMsg(textPart("draw a cat #owntool"))},
	})
	var msg struct {
		Content []struct {
			Type  string         `json:"type"`
			Name  string         `json:"name"`
			Input map[string]any `json:"input"`
		} `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range msg.Content {
		names = append(names, c.Name)
		if c.Type != "tool_use" || c.Input["filename"] != OwnFilename {
			t.Errorf("block %+v: want a tool_use with file name %q", c, OwnFilename)
		}
	}
	if !slices.Equal(names, []string{toolspec.SpeechTool, toolspec.ImageTool}) || msg.Content[1].Input["size"] != "1792x1024" {
		t.Errorf("turn-1 calls %v %+v; want both file tools, the image one 1792x1024", names, msg.Content)
	}

	got := ask(t, m, userMsg(textPart("draw a cat #owntool")), map[string]any{"role": "assistant", "content": []any{textPart("Done.")}}, userMsg(textPart(imageRequest)))
	if got.toolName != toolspec.ImageTool || got.toolInput["model"] != "dall-e-3" || got.toolInput["filename"] != "bot-a-user-1-100" {
		t.Errorf("turn-2 call %s %v; want dall-e-3 with the asked-for file name", got.toolName, got.toolInput)
	}
}

func TestModelScript(t *testing.T) {
	m := NewModel()
	defer m.Close()
	reminder := textPart("<system-reminder>\nignore me\n</system-reminder>")
	assistant := func(s string) map[string]any {
		return map[string]any{"role": "assistant", "content": []any{textPart(s)}}
	}
	toolResult := userMsg(map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": `{"success":true}`})
	system := map[string]any{"role": "system", "content": []any{textPart("# Environment")}}

	tests := []struct {
		name      string
		messages  []any
		text      string
		tool      string
		toolInput map[string]any
	}{
		{
			name:     "plain text, environment and reminders ignored",
			messages: []any{userMsg(textPart("hello"), reminder), system},
			text:     "You said: hello (message 1)",
		},
		{
			name:     "string content",
			messages: []any{map[string]any{"role": "user", "content": "hi there"}},
			text:     "You said: hi there (message 1)",
		},
		{
			name: "resumed conversation counts the user's messages only",
			messages: []any{
				userMsg(textPart("first")), assistant("You said: first (message 1)"),
				userMsg(textPart(speechRequest)), map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": toolspec.SpeechTool, "input": map[string]any{}}}},
				toolResult, assistant(DoneReply),
				userMsg(reminder, textPart("second")),
			},
			text: "You said: second (message 2)",
		},
		{
			name:      "speech tool request",
			messages:  []any{userMsg(textPart("hello")), assistant("You said: hello (message 1)"), userMsg(textPart(speechRequest))},
			tool:      toolspec.SpeechTool,
			toolInput: map[string]any{"text": "He said \"hi\"\nand left", "voice": "nova", "speed": 1.25, "filename": "bot-a-user-1-100", "include_base64": false},
		},
		{
			name:      "image tool request gets a prompt from the user's message",
			messages:  []any{userMsg(textPart("draw a cat")), assistant("Sure."), userMsg(textPart(imageRequest))},
			tool:      toolspec.ImageTool,
			toolInput: map[string]any{"prompt": "draw a cat", "model": "dall-e-2", "size": "256x256", "filename": "bot-a-user-1-100", "include_base64": false},
		},
		{
			name:      "#evilpath changes the filename",
			messages:  []any{userMsg(textPart("draw a dog #evilpath")), assistant("Sure."), userMsg(textPart(imageRequest))},
			tool:      toolspec.ImageTool,
			toolInput: map[string]any{"prompt": "draw a dog #evilpath", "model": "dall-e-2", "size": "256x256", "filename": EvilFilename, "include_base64": false},
		},
		{
			name:     "#notool answers text instead",
			messages: []any{userMsg(textPart("say it #notool")), assistant("ok"), userMsg(textPart(speechRequest))},
			text:     NoToolReply,
		},
		{
			name:     "tool result",
			messages: []any{userMsg(textPart(speechRequest)), map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": toolspec.SpeechTool, "input": map[string]any{}}}}, toolResult},
			text:     DoneReply,
		},
		{
			name:      "#call calls a tool in turn one",
			messages:  []any{userMsg(textPart(`what time is it? #call mcp__clock__now {"zone": "UTC"}`))},
			tool:      "mcp__clock__now",
			toolInput: map[string]any{"zone": "UTC"},
		},
		{
			name:      "#call without arguments",
			messages:  []any{userMsg(textPart("#call mcp__clock__now"))},
			tool:      "mcp__clock__now",
			toolInput: map[string]any{},
		},
		{
			name: "#call's results are answered",
			messages: []any{userMsg(textPart("#call mcp__clock__now #call mcp__clock__fail")),
				map[string]any{"role": "assistant", "content": []any{
					map[string]any{"type": "tool_use", "id": "t1", "name": "mcp__clock__now", "input": map[string]any{}},
					map[string]any{"type": "tool_use", "id": "t2", "name": "mcp__clock__fail", "input": map[string]any{}}}},
				userMsg(map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": []any{textPart("12:00")}},
					map[string]any{"type": "tool_result", "tool_use_id": "t2", "content": "it broke", "is_error": true})},
			text: ToolsReplyPrefix + "mcp__clock__now said: 12:00; mcp__clock__fail failed: it broke",
		},
		{
			name: "#loop calls again after each result",
			messages: []any{userMsg(textPart(`#loop mcp__clock__now {"n":1}`)),
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t1", "name": "mcp__clock__now", "input": map[string]any{}}}},
				userMsg(map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "12:00"})},
			tool:      "mcp__clock__now",
			toolInput: map[string]any{"n": 1},
		},
		{
			name: "an image with a caption, as the CLI passes them on",
			messages: []any{userMsg(imagePart(t, 64, 48), textPart("what is this?\n"),
				textPart("[Image: source: /tmp/claude-0/-data-claude-bot-a/0b9e4a57/images/1.png]"))},
			text: "You said: what is this? (message 1) [I see: image image/png 64x48]",
		},
		{
			name: "a photo alone is the user's message",
			messages: []any{userMsg(textPart("hi")), assistant("You said: hi (message 1)"),
				userMsg(imagePart(t, 2, 3), textPart("[Image: source: /tmp/claude-0/x/images/1.png]"))},
			text: "You said:  (message 2) [I see: image image/png 2x3]",
		},
		{
			name: "documents",
			messages: []any{userMsg(
				map[string]any{"type": "document", "title": "paper.pdf", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}},
				map[string]any{"type": "document", "title": "notes.md", "source": map[string]any{"type": "text", "media_type": "text/plain", "data": "# Notes\nmore"}},
				textPart("read these"))},
			text: `You said: read these (message 1) [I see: document "paper.pdf" application/pdf 4 bytes; document "notes.md" text/plain: "# Notes"]`,
		},
		{
			name:      "#bash with a path",
			messages:  []any{userMsg(textPart("please #bash /tmp/x/pwned now"))},
			tool:      "Bash",
			toolInput: map[string]any{"command": "touch /tmp/x/pwned"},
		},
		{
			name:      "#bash without a path",
			messages:  []any{userMsg(textPart("#bash"))},
			tool:      "Bash",
			toolInput: map[string]any{"command": "touch " + BashDefaultPath},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ask(t, m, tt.messages...)
			if got.text != tt.text || got.toolName != tt.tool {
				t.Fatalf("got text %q tool %q, want text %q tool %q", got.text, got.toolName, tt.text, tt.tool)
			}
			wantStop := "end_turn"
			if tt.tool != "" {
				wantStop = "tool_use"
				gotInput, _ := json.Marshal(got.toolInput)
				wantInput, _ := json.Marshal(tt.toolInput)
				if !bytes.Equal(gotInput, wantInput) {
					t.Errorf("tool input %s, want %s", gotInput, wantInput)
				}
			}
			if got.stopReason != wantStop {
				t.Errorf("stop reason %q, want %q", got.stopReason, wantStop)
			}
		})
	}
}

// imagePart is an image content block holding a PNG of width x height.
func imagePart(t *testing.T, width, height int) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, width, height))); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"type": "image", "source": map[string]any{
		"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(buf.Bytes())}}
}

func TestModelLongReply(t *testing.T) {
	m := NewModel()
	defer m.Close()
	got := ask(t, m, userMsg(textPart("tell me everything #long")))
	if n := utf8.RuneCountInString(got.text); n != LongReplyLength {
		t.Fatalf("reply has %d characters, want %d", n, LongReplyLength)
	}
	if strings.Count(got.text, "\n\n") < 10 {
		t.Errorf("reply is not in paragraphs: %q", got.text[:200])
	}
}

func TestModelRecordsRequests(t *testing.T) {
	m := NewModel()
	defer m.Close()
	ask(t, m, userMsg(textPart("hello")))
	reqs := m.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/messages" || r.RawQuery != "beta=true" || !r.Stream || r.Model != "claude-test" || r.System != "be brief" {
		t.Errorf("recorded %+v", r)
	}
	if len(r.Messages) != 1 || r.Messages[0].Content[0].Text != "hello" {
		t.Errorf("recorded messages %+v", r.Messages)
	}
}

func TestModelNonStreamingAndCountTokens(t *testing.T) {
	m := NewModel()
	defer m.Close()
	resp := post(t, m, "/v1/messages", map[string]any{"model": "claude-test", "messages": []any{userMsg(textPart("hi"))}})
	var msg struct {
		Type       string
		Role       string
		Content    []struct{ Type, Text string }
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || len(msg.Content) != 1 ||
		msg.Content[0].Text != "You said: hi (message 1)" || msg.StopReason != "end_turn" || msg.Usage.InputTokens == 0 {
		t.Errorf("non-streaming answer %+v", msg)
	}

	resp = post(t, m, "/v1/messages/count_tokens", map[string]any{"model": "claude-test", "messages": []any{userMsg(textPart("hi"))}})
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&count); err != nil || count.InputTokens == 0 {
		t.Errorf("count_tokens: %+v, %v", count, err)
	}
}

// apiError decodes an error answer and checks its shape.
func apiError(t *testing.T, resp *http.Response, status int, errType string) {
	t.Helper()
	var body struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status || body.Type != "error" || body.Error.Type != errType || body.Error.Message == "" {
		t.Errorf("got HTTP %d %+v, want %d %s", resp.StatusCode, body, status, errType)
	}
}

func TestModelFailures(t *testing.T) {
	m := NewModel()
	defer m.Close()
	stream := func(text string) map[string]any {
		return map[string]any{"model": "m", "stream": true, "messages": []any{userMsg(textPart(text))}}
	}
	apiError(t, post(t, m, "/v1/messages", stream("please #fail")), http.StatusBadRequest, "invalid_request_error")

	m.FailNext(2, 529)
	apiError(t, post(t, m, "/v1/messages", stream("a")), 529, "overloaded_error")
	apiError(t, post(t, m, "/v1/messages", stream("b")), 529, "overloaded_error")
	if got := ask(t, m, userMsg(textPart("c"))); got.text != "You said: c (message 1)" {
		t.Errorf("after injected failures: %q", got.text)
	}
	apiError(t, post(t, m, "/v1/other", stream("a")), http.StatusNotFound, "not_found_error")
}

func TestModelHangIsReleasedOnClose(t *testing.T) {
	m := NewModel()
	resp := post(t, m, "/v1/messages", map[string]any{"model": "m", "stream": true, "messages": []any{userMsg(textPart("#hang"))}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("hanging stream ended before Close: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close blocked on a held request")
	}
	<-read
}

// Pause holds every answer until resume: the request is recorded, and its
// answer comes only then.
func TestModelPause(t *testing.T) {
	m := NewModel()
	defer m.Close()
	resume := m.Pause()
	answered := make(chan string, 1)
	go func() {
		resp, err := http.Post(m.URL+"/v1/messages", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"held"}]}`))
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answered <- string(body)
	}()
	for deadline := time.Now().Add(30 * time.Second); len(m.Requests()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the model")
		}
	}
	select {
	case got := <-answered:
		t.Fatalf("answered while paused: %q", got)
	default:
	}
	resume()
	if got := <-answered; !strings.Contains(got, "You said: held") {
		t.Fatalf("after resume: %q, want the answer", got)
	}
	resume() // a second call does nothing
	if got := ask(t, m, userMsg(textPart("free"))); got.text != "You said: free (message 1)" {
		t.Errorf("after resume: %q", got.text)
	}
}

func TestModelDelays(t *testing.T) {
	m := NewModel()
	defer m.Close()

	// A delay holds the answer; a client giving up ends the request.
	m.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.URL+"/v1/messages", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered with HTTP %d despite an hour's delay", resp.StatusCode)
	}
	if n := len(m.Requests()); n != 1 {
		t.Fatalf("%d requests recorded, want the held one", n)
	}

	// Lower bounds only: a loaded machine may take longer, never shorter.
	m.SetDelay(50 * time.Millisecond)
	start := time.Now()
	if got := ask(t, m, userMsg(textPart("quick"))); got.text != "You said: quick (message 1)" {
		t.Errorf("got %q", got.text)
	}
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Errorf("answered after %v, before the 50ms delay", elapsed)
	}
	m.SetDelay(0)
	start = time.Now()
	if got := ask(t, m, userMsg(textPart("take your time #slow"))); got.text != "You said: take your time #slow (message 1)" {
		t.Errorf("got %q", got.text)
	}
	if elapsed := time.Since(start); elapsed < SlowDelay {
		t.Errorf("#slow answered after %v, before SlowDelay %v", elapsed, SlowDelay)
	}
}

// Paced, an answer's deltas take their time by their length, and each
// text delta is recorded, in order, with its answer.
func TestModelPaceAndTextDeltas(t *testing.T) {
	m := NewModel()
	defer m.Close()
	m.SetPace(64 * time.Millisecond) // a millisecond a byte
	text := strings.Repeat("word ", 30)
	start := time.Now()
	got := ask(t, m, userMsg(textPart(text)))
	answer := "You said: " + text + " (message 1)"
	if elapsed := time.Since(start); elapsed < time.Duration(len(answer))*time.Millisecond {
		t.Errorf("%d bytes answered in %v: faster than the pace", len(answer), elapsed)
	}
	var joined string
	var last time.Time
	for _, d := range m.TextDeltas() {
		if d.Answer != 1 || d.At.Before(last) {
			t.Errorf("delta %+v out of order or of another answer", d)
		}
		joined, last = joined+d.Text, d.At
	}
	if joined != got.text || joined != answer {
		t.Errorf("deltas make %q, the answer %q", joined, got.text)
	}
}

// The tests below run the real Claude Code CLI against the model.

// TestStandInMCPProcess is not a test: it is the stand-in MCP server when
// the CLI starts this test binary through StandInMCPConfig.
func TestStandInMCPProcess(t *testing.T) {
	RunStandInMCPIfRequested()
	t.Skip("helper process for the real-CLI tests")
}

// cliRun prepares the real CLI in the driver's invocation, with a fresh
// HOME and working directory and the stand-in MCP servers writing into out.
func cliRun(t *testing.T, m *Model, out string, sessionArgs ...string) CLIRun {
	t.Helper()
	path := RequireCLI(t)
	home, work := t.TempDir(), t.TempDir()
	cfg := StandInMCPConfig(out, "-test.run=^TestStandInMCPProcess$")
	cfgPath := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--system-prompt", "You are a test bot.", "--system-prompt-snapshot", "off",
		"--tools", "", "--strict-mcp-config", "--mcp-config", cfgPath,
		"--allowedTools", toolspec.SpeechTool + "," + toolspec.ImageTool, "--permission-mode", "dontAsk"}, sessionArgs...)
	env := append(os.Environ(), "HOME="+home, "ENABLE_TOOL_SEARCH=false")
	return CLIRun{Path: path, Args: args, Dir: work, Env: append(env, m.Env()...)}
}

// event is the part of a stdout line these tests check.
type event struct {
	Type, Subtype string
	IsError       bool `json:"is_error"`
	Result        string
	SessionID     string `json:"session_id"`
	Message       struct {
		Content []struct {
			Type, Name, Text string
			Input            map[string]any
			Content          json.RawMessage
			IsError          bool `json:"is_error"`
		}
	}
}

func events(t *testing.T, stdout []byte) []event {
	t.Helper()
	var evs []event
	for line := range bytes.Lines(stdout) {
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func results(evs []event) []event {
	var rs []event
	for _, ev := range evs {
		if ev.Type == "result" {
			rs = append(rs, ev)
		}
	}
	return rs
}

// runTurns runs the CLI to the end and returns its events and exit code.
func runTurns(t *testing.T, run CLIRun, texts ...string) ([]event, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, err := run.Turns(ctx, texts...)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%v\nstdout:\n%s", err, stdout)
	}
	if os.Getenv("CLAUDETEST_DUMP") != "" {
		t.Logf("stdout:\n%s", stdout)
	}
	if exit != nil {
		return events(t, stdout), exit.ExitCode()
	}
	return events(t, stdout), 0
}

// cleanResults runs the CLI, expects exit status 0, and returns its results.
func cleanResults(t *testing.T, run CLIRun, texts ...string) []event {
	t.Helper()
	evs, code := runTurns(t, run, texts...)
	if code != 0 {
		t.Fatalf("the CLI exited with status %d", code)
	}
	return results(evs)
}

const sessionID = "0b9e4a57-2f4c-4d8e-9a51-6c1d3e2f7a10"

func TestRealCLITextAndResume(t *testing.T) {
	m := NewModel()
	defer m.Close()
	run := cliRun(t, m, t.TempDir(), "--session-id", sessionID)
	rs := cleanResults(t, run, `hello "world"`)
	if len(rs) != 1 || rs[0].IsError || rs[0].Result != `You said: hello "world" (message 1)` || rs[0].SessionID != sessionID {
		t.Fatalf("first message: %+v", rs)
	}
	req := m.Requests()[0]
	if req.Path != "/v1/messages" || !req.Stream || !strings.Contains(req.System, "You are a test bot.") ||
		!slices.Contains(req.Tools, toolspec.SpeechTool) || !slices.Contains(req.Tools, toolspec.ImageTool) || slices.Contains(req.Tools, "Bash") {
		t.Errorf("the CLI sent path %s stream %v system %q tools %v", req.Path, req.Stream, req.System, req.Tools)
	}

	run.Args = append(run.Args[:len(run.Args)-2], "--resume", sessionID)
	rs = cleanResults(t, run, "again")
	if len(rs) != 1 || rs[0].Result != "You said: again (message 2)" {
		t.Fatalf("resumed message: %+v", rs)
	}
}

func TestRealCLIFail(t *testing.T) {
	m := NewModel()
	defer m.Close()
	evs, code := runTurns(t, cliRun(t, m, t.TempDir(), "--session-id", sessionID), "break #fail")
	// The CLI reports the API error as an is_error result with subtype
	// success, then exits with status 1.
	rs := results(evs)
	if len(rs) != 1 || !rs[0].IsError || rs[0].Subtype != "success" || !strings.Contains(rs[0].Result, "400") || code != 1 {
		t.Fatalf("exit status %d, results %+v", code, rs)
	}
}

func TestRealCLIToolFlows(t *testing.T) {
	tests := []struct {
		name, prompt, turn2, tool, ext string
	}{
		{"speech", "hello", speechRequest, toolspec.SpeechTool, ".mp3"},
		{"image", "draw a cat", imageRequest, toolspec.ImageTool, ".png"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewModel()
			defer m.Close()
			out := t.TempDir()
			evs, code := runTurns(t, cliRun(t, m, out, "--session-id", sessionID), tt.prompt, tt.turn2)
			rs := results(evs)
			if code != 0 {
				t.Errorf("exit status %d", code)
			}
			if len(rs) != 2 || rs[0].IsError || rs[1].IsError || rs[1].Result != DoneReply {
				t.Fatalf("results %+v", rs)
			}
			var called, answered bool
			for _, ev := range evs {
				for _, c := range ev.Message.Content {
					called = called || (ev.Type == "assistant" && c.Type == "tool_use" && c.Name == tt.tool)
					answered = answered || (ev.Type == "user" && c.Type == "tool_result" && !c.IsError && bytes.Contains(c.Content, []byte(`success`)))
				}
			}
			if !called || !answered {
				t.Errorf("tool_use of %s seen %v, successful tool_result seen %v", tt.tool, called, answered)
			}
			files, _ := filepath.Glob(filepath.Join(out, "bot-a-user-1-100-*"+tt.ext))
			if len(files) != 1 {
				t.Errorf("files written: %v", files)
			}
		})
	}
}

func TestRealCLIRefusesBash(t *testing.T) {
	m := NewModel()
	defer m.Close()
	target := filepath.Join(t.TempDir(), "pwned")
	rs := cleanResults(t, cliRun(t, m, t.TempDir(), "--session-id", sessionID), "#bash "+target)
	if len(rs) != 1 || rs[0].IsError || rs[0].Result != DoneReply {
		t.Fatalf("results %+v", rs)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("the CLI ran the command: %v", err)
	}
}

func TestRealCLIRetriesOverloaded(t *testing.T) {
	m := NewModel()
	defer m.Close()
	m.FailNext(1, 529)
	rs := cleanResults(t, cliRun(t, m, t.TempDir(), "--session-id", sessionID), "hi")
	if len(rs) != 1 || rs[0].IsError || rs[0].Result != "You said: hi (message 1)" {
		t.Fatalf("results %+v", rs)
	}
	if n := len(m.Requests()); n != 2 {
		t.Errorf("the CLI made %d requests, want the failed one and one retry", n)
	}
}

// brainbot's note of per-message values opens a message but is not the
// user's text: a photo with only a note is a photo without a caption. Each
// request is stamped with its arrival.
func TestModelSkipsTheNote(t *testing.T) {
	m := NewModel()
	defer m.Close()
	note := textPart(`<brainbot-context>{"time":"14:05 UTC"}</brainbot-context>`)
	if got := ask(t, m, userMsg(note, textPart("hello"))); got.text != "You said: hello (message 1)" {
		t.Errorf("a message with a note: %q", got.text)
	}
	if got := ask(t, m, userMsg(note, imagePart(t, 8, 6))); got.text != "You said:  (message 1) [I see: image image/png 8x6]" {
		t.Errorf("a photo with a note: %q", got.text)
	}
	if reqs := m.Requests(); len(reqs) != 2 || reqs[0].At.IsZero() || reqs[1].At.Before(reqs[0].At) {
		t.Errorf("requests not stamped with their arrival: %v", reqs)
	}
}
