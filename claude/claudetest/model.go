package claudetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif"  // images the model describes
	_ "image/jpeg" // (describeFile)
	_ "image/png"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"brainbot/sysprompt"
	"brainbot/toolspec"
)

// Scripted values tests assert on.
const (
	// DoneReply answers a tool result.
	DoneReply = "Done."
	// NoToolReply answers a tool request when the user's message said #notool.
	NoToolReply = "I would rather not call that tool."
	// EvilFilename replaces the tool's filename when the user said #evilpath.
	EvilFilename = "../../evil"
	// OwnFilename is the file name of "#owntool"'s calls.
	OwnFilename = "own-choice"
	// BashDefaultPath is what "#bash" without a path asks to touch.
	BashDefaultPath = "brainbot-bash-was-here"
	// LongReplyLength is the length in characters of the "#long" reply.
	LongReplyLength = 6000
	// SlowDelay is how long "#slow" waits before answering.
	SlowDelay = time.Second
	// APIKey is the key Env hands the CLI; the model accepts any key.
	APIKey = "test-key"
	// StructuredTool is the tool the CLI offers under --json-schema.
	StructuredTool = "StructuredOutput"
)

// Model is a scripted Anthropic Messages API on loopback for the real
// Claude Code CLI. Its methods are safe for concurrent use.
//
// NewModel starts an httptest server speaking the Messages API the way the
// Claude Code CLI 2.1.328 uses it: POST /v1/messages?beta=true with
// "stream": true answered with Anthropic server-sent events (message_start,
// ping, content_block_start, content_block_delta with text_delta or
// input_json_delta, content_block_stop, message_delta with the stop_reason,
// message_stop); the same request without "stream" answered with one JSON
// message; POST /v1/messages/count_tokens answered with {"input_tokens":N}.
// Anything else gets a 404 in the API's error shape. Point the CLI at it with
// Model.Env.
//
// What the CLI 2.1.328 sends (observed, -p with stream-json, no built-in
// tools): one streaming POST /v1/messages?beta=true per model round trip and
// nothing else with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1; headers
// x-api-key, anthropic-version 2023-06-01, a long anthropic-beta list,
// X-Claude-Code-Session-Id and User-Agent claude-cli/<version>. The body's
// system is a list of text blocks (a billing header line, an SDK preamble,
// then our --system-prompt); messages holds the whole conversation, where
// the user's own text is its own text block and the CLI adds entries with
// "role": "system" (an environment description) after it; tools lists the
// MCP tools as mcp__<server>__<tool>.
//
// The replies are deterministic, so the bot's tests, the end-to-end suite
// and the demo can assert on them. The "current text" is the last text
// block of the last user message that is not a <system-reminder> (nor
// brainbot's note of per-message values, sysprompt.Note):
//
//   - A plain message gets "You said: <current text> (message N)", where N
//     counts the user's own text messages in the conversation (tool requests
//     below and tool results are not counted), so a resumed session shows
//     "(message 2)".
//   - A message naming mcp__tts__text_to_speech or
//     mcp__image-gen__generate_image (the driver's turn-2 request) gets a
//     tool_use of that tool whose input is the first JSON object in the
//     message; for the image tool a missing "prompt" is set to the user's
//     previous message. A message whose last user entry carries a
//     tool_result gets the text "Done.", unless the user's message called
//     tools with "#call" or "#loop" (see modelcalls.go: the model then
//     answers the tools' results, or calls again).
//   - "#ask [JSON object]" writes AskPreamble and, in the same message,
//     asks the user a question with options (toolspec.QuestionTool):
//     the object, or DefaultQuestion (modelcalls.go).
//   - Directives anywhere in the current text: "#fail" answers HTTP 400
//     invalid_request_error (the CLI reports a result with is_error);
//     "#hang" sends the stream's headers and then nothing until the client
//     disconnects or the model is closed; "#slow" waits SlowDelay before
//     answering; "#long" answers LongReplyLength characters in paragraphs;
//     "#bash [path]" answers a tool_use of the built-in Bash tool with
//     {"command":"touch <path>"} (path defaults to BashDefaultPath,
//     relative to the CLI's working directory); a CLI run with --tools ""
//     must refuse it, and the model then answers "Done.".
//   - "#owntool" answers, in one message, a tool_use of each of our file
//     tools the request offers, with the dearest settings (dall-e-3
//     1792x1024 hd vivid; tts-1-hd, onyx, speed 4) and the file name
//     OwnFilename: a model spending money on its own in turn one.
//   - A message with image or document blocks gets the plain reply
//     followed by what the model received in them: "You said: what is it?
//     (message 1) [I see: image image/jpeg 64x48]" (a PDF: its title, type
//     and length; a text document: its title and first line). A photo
//     alone counts as a user message. The "[Image: source: <path>]" text
//     the CLI adds for each image is not the user's text.
//   - Directives in the user's message before a tool request: "#evilpath"
//     makes the tool_use's filename "../../evil"; "#notool" answers text
//     (NoToolReply) instead of calling the tool; "#owntool" puts its
//     costly settings into the call.
//
// Tests can also add a delay to every answer (SetDelay), hold every
// answer until they let it go (Pause), and make the next requests fail
// with an HTTP status (FailNext).
type Model struct {
	// URL is the server's base URL (http://127.0.0.1:port), the value of
	// ANTHROPIC_BASE_URL.
	URL string

	srv    *httptest.Server
	closed chan struct{} // closed by Close: releases held (#hang) requests
	once   sync.Once

	mu       sync.Mutex
	requests []Request
	delay    time.Duration
	// pace is the pause between a streamed answer's deltas; streamStarts
	// when each streamed answer sent its first content delta.
	pace         time.Duration
	streamStarts []time.Time
	// deltas are the text deltas sent, in order.
	deltas   []Delta
	failures []int         // HTTP statuses for the next message requests, in order
	holding  string        // requests whose current text holds it are held (Hold)
	paused   chan struct{} // answers wait for it to close (Pause); nil: none
	served   int           // message responses so far: numbers message and tool ids
}

// Request is one request the CLI made, as recorded by the model.
type Request struct {
	// At is when the model received it (its body read).
	At       time.Time
	Method   string
	Path     string // without the query, e.g. /v1/messages
	RawQuery string // e.g. beta=true
	Header   http.Header

	Model  string
	Stream bool
	// System is the text of the system blocks, joined by newlines.
	System   string
	Messages []Message
	// Tools are the names of the tools offered to the model.
	Tools []string
	// StructuredSchema is the input schema of the StructuredOutput tool
	// the CLI offers under --json-schema (nil without).
	StructuredSchema json.RawMessage
}

// Message is one entry of a request's conversation. The CLI sends the roles
// "user", "assistant" and "system".
type Message struct {
	Role    string
	Content []Block
}

// Block is one content block of a message. Fields are set by type: Text for
// "text"; ID, Name and Input for "tool_use"; ToolUseID, IsError and
// Content for "tool_result"; Source (and a document's Title) for "image"
// and "document".
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *Source         `json:"source,omitempty"`
	Title     string          `json:"title,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

// Source is where an image or document block's data is: Type base64
// (Data is base64) or text (Data is the text itself).
type Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// Files returns the message's image and document blocks.
func (m Message) Files() []Block {
	var files []Block
	for _, b := range m.Content {
		if b.Type == "image" || b.Type == "document" {
			files = append(files, b)
		}
	}
	return files
}

// UnmarshalJSON accepts a message's content as a string or as blocks, as
// the Messages API does.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	m.Content = nil
	var s string
	if err := json.Unmarshal(raw.Content, &s); err == nil {
		m.Content = []Block{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// NewModel starts a scripted model (see Model). Close it when done.
func NewModel() *Model {
	m := &Model{closed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", m.serveMessages)
	mux.HandleFunc("POST /v1/messages/count_tokens", m.serveCountTokens)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, "not_found_error", "scripted model: no route for "+r.Method+" "+r.URL.Path)
	})
	m.srv = httptest.NewServer(mux)
	m.URL = m.srv.URL
	return m
}

// Close releases held requests and shuts the server down.
func (m *Model) Close() {
	m.once.Do(func() { close(m.closed) })
	m.srv.CloseClientConnections()
	m.srv.Close()
}

// Env is what the CLI needs in its environment to use this model offline:
// ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY and
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (no telemetry, update checks
// or other requests to Anthropic). Append it to the CLI's environment; the
// CLI also needs its own HOME.
func (m *Model) Env() []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + m.URL,
		"ANTHROPIC_API_KEY=" + APIKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
}

// Requests returns the requests recorded so far, oldest first.
func (m *Model) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.requests...)
}

// SetPace makes every later streamed answer pause d before each 64 bytes
// of its deltas (text comes 64 bytes a delta, a tool call's input 16), as
// a model writing at a fixed rate: 256 ms is about 250 characters a
// second.
func (m *Model) SetPace(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pace = d
}

// StreamStarts returns when each streamed answer sent its first content
// delta, oldest first.
func (m *Model) StreamStarts() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.streamStarts)
}

// Delta is one text delta the model streamed: when, in which answer
// (numbered from 1 in the order they began), and its text.
type Delta struct {
	At     time.Time
	Answer int
	Text   string
}

// TextDeltas returns the text deltas streamed so far, in order: a test
// can tell what happened before the model's last word.
func (m *Model) TextDeltas() []Delta {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.deltas)
}

// SetDelay makes every later answer wait d before its first byte.
func (m *Model) SetDelay(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delay = d
}

// Pause makes every later answer wait, before its first byte, until
// resume is called: a test that needs a request still running while others
// arrive holds it so, rather than guessing how long a delay is enough.
func (m *Model) Pause() (resume func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	paused := make(chan struct{})
	m.paused = paused
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			close(paused)
			if m.paused == paused {
				m.paused = nil
			}
		})
	}
}

// FailNext makes the next n message requests fail with the HTTP status
// (400, 401, 429, 500, 529...) and the API's matching error type. The CLI
// retries 429 and 5xx with backoff before it gives up, so each of those
// attempts uses up one failure.
func (m *Model) FailNext(n, status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range n {
		m.failures = append(m.failures, status)
	}
}

// Hold holds every later request whose current text contains substr
// (answering nothing, like "#hang") until its client goes away or the
// model is closed; "" holds nothing more. Requests held already stay so.
func (m *Model) Hold(substr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holding = substr
}

// requestBody is the part of a Messages API request body the model reads.
type requestBody struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []Message       `json:"messages"`
	Tools    []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// record parses and stores a request; the body's size estimates its tokens.
func (m *Model) record(r *http.Request) (Request, int, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return Request{}, 0, err
	}
	var body requestBody
	if err := json.Unmarshal(data, &body); err != nil {
		return Request{}, 0, err
	}
	req := Request{
		At:       time.Now(),
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Model:    body.Model,
		Stream:   body.Stream,
		System:   systemText(body.System),
		Messages: body.Messages,
	}
	for _, t := range body.Tools {
		req.Tools = append(req.Tools, t.Name)
		if t.Name == StructuredTool {
			req.StructuredSchema = t.InputSchema
		}
	}
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	return req, len(data)/4 + 1, nil
}

// systemText flattens the system field, a string or text blocks.
func systemText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []Block
	_ = json.Unmarshal(raw, &blocks) // absent or malformed: no system text
	texts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n")
}

func (m *Model) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	_, tokens, err := m.record(r)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "scripted model: "+err.Error())
		return
	}
	writeJSON(w, map[string]int{"input_tokens": tokens})
}

func (m *Model) serveMessages(w http.ResponseWriter, r *http.Request) {
	req, inputTokens, err := m.record(r)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "scripted model: "+err.Error())
		return
	}
	m.mu.Lock()
	delay, pace, holding, paused := m.delay, m.pace, m.holding, m.paused
	var injected int
	if len(m.failures) > 0 {
		injected, m.failures = m.failures[0], m.failures[1:]
	}
	m.mu.Unlock()

	if !m.waitFor(r, paused) || !m.wait(r, delay) {
		return
	}
	if injected != 0 {
		writeAPIError(w, injected, errorType(injected), fmt.Sprintf("scripted model: injected HTTP %d", injected))
		return
	}
	a := script(req)
	if last := lastUserMessage(req.Messages); holding != "" && last != nil {
		if text, _ := ownText(*last); strings.Contains(text, holding) {
			a.hang = true
		}
	}
	switch {
	case a.fail:
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "scripted model: failure requested by #fail")
		return
	case a.hang:
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		m.hold(r)
		return
	}
	if a.slow && !m.wait(r, SlowDelay) {
		return
	}

	m.mu.Lock()
	m.served++
	n := m.served
	m.mu.Unlock()
	msg := newMessage(n, req.Model, a, inputTokens)
	if req.Stream {
		writeStream(r.Context(), w, msg, pace, func() {
			m.mu.Lock()
			m.streamStarts = append(m.streamStarts, time.Now())
			m.mu.Unlock()
		}, func(text string) {
			m.mu.Lock()
			m.deltas = append(m.deltas, Delta{At: time.Now(), Answer: n, Text: text})
			m.mu.Unlock()
		})
	} else {
		writeJSON(w, msg)
	}
}

// wait sleeps d and reports whether to go on: false when the client went
// away or the model is closing first.
func (m *Model) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-m.closed:
		return false
	}
}

// waitFor waits until resumed is closed (nil: at once); false if the client
// went away or the model is closing first.
func (m *Model) waitFor(r *http.Request, resumed <-chan struct{}) bool {
	if resumed == nil {
		return true
	}
	select {
	case <-resumed:
		return true
	case <-r.Context().Done():
		return false
	case <-m.closed:
		return false
	}
}

// hold blocks until the client goes away or the model is closing.
func (m *Model) hold(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-m.closed:
	}
}

// answer is what the script decided for one request.
type answer struct {
	text  string
	tools []toolUse // in one message, like parallel tool calls
	// preamble is text written before the tools, in the same message.
	preamble string

	fail, hang, slow bool
}

type toolUse struct {
	name  string
	input json.RawMessage
}

// script decides the answer to a request; see the package doc.
func script(req Request) answer {
	last := lastUserMessage(req.Messages)
	if last == nil {
		return answer{text: "You said:  (message 0)"}
	}
	for _, b := range last.Content {
		if b.Type == "tool_result" {
			return answerToolResults(req.Messages)
		}
	}
	current, _ := ownText(*last)
	a := answer{
		// In the system prompt, it makes every request of a brain fail.
		fail: strings.Contains(current, "#fail") || strings.Contains(req.System, "#fail"),
		hang: strings.Contains(current, "#hang"),
		slow: strings.Contains(current, "#slow"),
	}
	switch tool := requestedTool(current); {
	case req.StructuredSchema != nil:
		a.tools = []toolUse{{name: StructuredTool, input: structuredInput(req.StructuredSchema, current)}}
	case tool != "":
		earlier := previousUserText(req.Messages)
		if strings.Contains(earlier, "#notool") || strings.Contains(current, "#notool") {
			a.text = NoToolReply
			return a
		}
		a.tools = []toolUse{{name: tool, input: toolInput(tool, current, earlier)}}
	case strings.Contains(current, "#bash"):
		input, _ := json.Marshal(map[string]string{"command": "touch " + bashPath(current)})
		a.tools = []toolUse{{name: "Bash", input: input}}
	case strings.Contains(current, "#ask"):
		a.preamble, a.tools = AskPreamble, []toolUse{askCall(current)}
	case strings.Contains(current, "#call ") || strings.Contains(current, "#loop "):
		a.tools = directiveCalls(current)
	case strings.Contains(current, "#long"):
		a.text = scriptedLongReply()
	default:
		a.text = fmt.Sprintf("You said: %s (message %d)", current, countUserMessages(req.Messages))
		if files := last.Files(); len(files) > 0 {
			// The CLI ends the text of a message with images with a newline.
			a.text = fmt.Sprintf("You said: %s (message %d) %s", strings.TrimSpace(current), countUserMessages(req.Messages), describeFiles(files))
		}
		if strings.Contains(current, "#owntool") {
			a.tools = ownToolCalls(req.Tools, current) // none offered: the text
		}
	}
	return a
}

// structuredInput answers a StructuredOutput schema for the user's text
// current: each property with an enum gets its first value, a property
// whose description asks for an id the first id="..." of the text, and
// each other string "<property> of <that first value>", so a panel member
// comments on the first answer it is shown ("comment of voice").
func structuredInput(schema json.RawMessage, current string) json.RawMessage {
	var s struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Enum        []any  `json:"enum"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s) // not an object schema: an empty answer
	input := map[string]any{}
	first := ""
	names := slices.Sorted(maps.Keys(s.Properties))
	choose := func(name string, value any) {
		input[name] = value
		if first == "" {
			first = fmt.Sprint(value)
		}
	}
	for _, name := range names {
		p := s.Properties[name]
		id := idAttribute.FindStringSubmatch(current)
		switch {
		case len(p.Enum) > 0:
			choose(name, p.Enum[0])
		case strings.Contains(p.Description, " id ") && id != nil:
			choose(name, id[1])
		}
	}
	for _, name := range names {
		if _, chosen := input[name]; !chosen && s.Properties[name].Type == "string" {
			input[name] = strings.TrimSpace(name + " of " + first)
		}
	}
	data, _ := json.Marshal(input) // strings and enum values from JSON: cannot fail
	return data
}

// idAttribute is an id="..." in a prompt (a panel's answers are listed so).
var idAttribute = regexp.MustCompile(`\bid="([^"]*)"`)

func lastUserMessage(msgs []Message) *Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return &msgs[i]
		}
	}
	return nil
}

// ownText is the user's own text in a message: its last text block that
// is not a <system-reminder> the CLI injected, nor brainbot's note of the
// system prompt's per-message values (sysprompt.Note).
func ownText(m Message) (string, bool) {
	for i := len(m.Content) - 1; i >= 0; i-- {
		b := m.Content[i]
		if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") && !imageNote.MatchString(b.Text) && !sysprompt.IsNote(b.Text) {
			return b.Text, true
		}
	}
	return "", false
}

// imageNote is the text block the CLI adds after a user message's text
// for each image in it, naming the copy it saved.
var imageNote = regexp.MustCompile(`^\[Image: source: [^\]]*\]$`)

// isUserMessage reports whether m is a message the user wrote: a user
// message with its own text, neither a tool result nor a tool request.
func isUserMessage(m Message) (string, bool) {
	if m.Role != "user" {
		return "", false
	}
	for _, b := range m.Content {
		if b.Type == "tool_result" {
			return "", false
		}
	}
	text, ok := ownText(m)
	if !ok && len(m.Files()) == 0 || requestedTool(text) != "" {
		return "", false
	}
	return text, true
}

func countUserMessages(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		if _, ok := isUserMessage(m); ok {
			n++
		}
	}
	return n
}

// previousUserText is the user's message before the last user message: the
// request a turn-2 tool request is about.
func previousUserText(msgs []Message) string {
	last := len(msgs) - 1
	for last >= 0 && msgs[last].Role != "user" {
		last--
	}
	for i := last - 1; i >= 0; i-- {
		if text, ok := isUserMessage(msgs[i]); ok {
			return text
		}
	}
	return ""
}

func requestedTool(text string) string {
	switch {
	case strings.Contains(text, toolspec.SpeechTool):
		return toolspec.SpeechTool
	case strings.Contains(text, toolspec.ImageTool):
		return toolspec.ImageTool
	}
	return ""
}

// toolInput is the first JSON object in the tool request, adjusted by the
// user's directives.
func toolInput(tool, current, earlier string) json.RawMessage {
	input := firstJSONObject(current)
	if tool == toolspec.ImageTool {
		if _, ok := input["prompt"]; !ok {
			input["prompt"] = earlier
		}
	}
	if strings.Contains(earlier, "#evilpath") || strings.Contains(current, "#evilpath") {
		input["filename"] = EvilFilename
	}
	if strings.Contains(earlier, "#owntool") {
		// Keeps asking for its own costly settings in turn 2 too.
		maps.Copy(input, costlyArgs[tool])
	}
	data, _ := json.Marshal(input) // values came from JSON: cannot fail
	return data
}

// costlyArgs are the settings a model of "#owntool" picks for itself: the
// dearest OpenAI offers, where the test brains choose cheap ones.
var costlyArgs = map[string]map[string]any{
	toolspec.SpeechTool: {"voice": "onyx", "speed": 4.0, "model": "tts-1-hd"},
	toolspec.ImageTool:  {"model": "dall-e-3", "size": "1792x1024", "quality": "hd", "style": "vivid"},
}

// ownToolCalls are "#owntool"'s turn-1 calls: each of our file tools the
// CLI offers, with costly settings and a file name of its own.
func ownToolCalls(offered []string, text string) []toolUse {
	var calls []toolUse
	for _, tool := range []string{toolspec.SpeechTool, toolspec.ImageTool} {
		if !slices.Contains(offered, tool) {
			continue
		}
		input := map[string]any{"text": text, "prompt": text, "filename": OwnFilename}
		maps.Copy(input, costlyArgs[tool])
		data, _ := json.Marshal(input) // strings and numbers: cannot fail
		calls = append(calls, toolUse{name: tool, input: data})
	}
	return calls
}

// describeFiles says what the model received in files, so a test can tell
// it saw them: "[I see: image image/png 64x48; document "a.pdf"
// application/pdf 1234 bytes; document "notes.md" text/plain: "# Notes"]".
func describeFiles(files []Block) string {
	parts := make([]string, 0, len(files))
	for _, f := range files {
		parts = append(parts, describeFile(f))
	}
	return "[I see: " + strings.Join(parts, "; ") + "]"
}

// describeFile is an image's type and size, a PDF's name, type and
// length, a text document's name and first line.
func describeFile(f Block) string {
	if f.Source == nil {
		return f.Type + " without a source"
	}
	src := *f.Source
	if src.Type == "text" {
		first, _, _ := strings.Cut(src.Data, "\n")
		return fmt.Sprintf("document %q %s: %q", f.Title, src.MediaType, first)
	}
	data, err := base64.StdEncoding.DecodeString(src.Data)
	switch {
	case err != nil:
		return fmt.Sprintf("%s %s with broken base64", f.Type, src.MediaType)
	case f.Type == "document":
		return fmt.Sprintf("document %q %s %d bytes", f.Title, src.MediaType, len(data))
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Sprintf("image %s that does not decode (%d bytes)", src.MediaType, len(data))
	}
	return fmt.Sprintf("image %s %dx%d", src.MediaType, cfg.Width, cfg.Height)
}

// firstJSONObject decodes the first complete JSON object in text; an empty
// map when there is none.
func firstJSONObject(text string) map[string]any {
	for i := strings.IndexByte(text, '{'); i >= 0; {
		var obj map[string]any
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		dec.UseNumber()
		if dec.Decode(&obj) == nil {
			return obj
		}
		next := strings.IndexByte(text[i+1:], '{')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return map[string]any{}
}

// bashPath is the word after "#bash", or BashDefaultPath.
func bashPath(text string) string {
	fields := strings.Fields(text[strings.Index(text, "#bash")+len("#bash"):])
	if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
		return BashDefaultPath
	}
	return fields[0]
}

// scriptedLongReply is exactly LongReplyLength characters of numbered paragraphs.
func scriptedLongReply() string {
	var b strings.Builder
	for i := 1; b.Len() < LongReplyLength; i++ {
		if i > 1 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "Paragraph %d. This is a long scripted reply, written to test how replies longer than one Telegram message are split and delivered in order.", i)
	}
	return strings.TrimSpace(b.String()[:LongReplyLength-1]) + "."
}

// message is a Messages API response message.
type message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []contentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        usage          `json:"usage"`
}

type contentBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// newMessage builds the complete response message for an answer; n numbers
// its ids.
func newMessage(n int, model string, a answer, inputTokens int) message {
	msg := message{
		ID:    fmt.Sprintf("msg_scripted_%04d", n),
		Type:  "message",
		Role:  "assistant",
		Model: model,
		Usage: usage{InputTokens: inputTokens},
	}
	stop := "end_turn"
	if len(a.tools) > 0 {
		stop = "tool_use"
		if a.preamble != "" {
			text := a.preamble
			msg.Content = append(msg.Content, contentBlock{Type: "text", Text: &text})
			msg.Usage.OutputTokens += len(text)/4 + 1
		}
		for i, tool := range a.tools {
			msg.Content = append(msg.Content, contentBlock{
				Type:  "tool_use",
				ID:    fmt.Sprintf("toolu_scripted_%04d_%d", n, i),
				Name:  tool.name,
				Input: tool.input,
			})
			msg.Usage.OutputTokens += len(tool.input)/4 + 1
		}
	} else {
		text := a.text
		msg.Content = append(msg.Content, contentBlock{Type: "text", Text: &text})
		msg.Usage.OutputTokens = len(text)/4 + 1
	}
	msg.StopReason = &stop
	return msg
}

// writeStream sends msg as the API's server-sent events: the content
// arrives in deltas, the stop reason and output tokens in message_delta.
// It stops when ctx ends: a client that went away (a CLI whose turn was
// interrupted) would otherwise keep the server's Close waiting for the
// rest of a paced answer.
func writeStream(ctx context.Context, w http.ResponseWriter, msg message, pace time.Duration, firstDelta func(), textDelta func(string)) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	send := func(event string, data any) {
		payload, _ := json.Marshal(data) // plain structs and maps: cannot fail
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, payload)
		flusher.Flush()
	}

	start := msg
	start.Content = []contentBlock{}
	start.StopReason = nil
	start.Usage.OutputTokens = 1
	send("message_start", map[string]any{"type": "message_start", "message": start})
	send("ping", map[string]string{"type": "ping"})
	for i, block := range msg.Content {
		empty := ""
		opening := block
		var deltaType, deltaField string
		var pieces []string
		if block.Type == "tool_use" {
			opening.Input = json.RawMessage(`{}`)
			deltaType, deltaField = "input_json_delta", "partial_json"
			pieces = chunks(string(block.Input), 16)
		} else {
			opening.Text = &empty
			deltaType, deltaField = "text_delta", "text"
			pieces = chunks(*block.Text, 64)
		}
		send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": opening})
		for _, p := range pieces {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pace * time.Duration(len(p)) / 64):
			}
			if firstDelta != nil {
				firstDelta()
				firstDelta = nil
			}
			if block.Type != "tool_use" && textDelta != nil {
				textDelta(p) // before it leaves: nothing it causes can come first
			}
			send("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": i,
				"delta": map[string]string{"type": deltaType, deltaField: p},
			})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": msg.StopReason, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": msg.Usage.OutputTokens},
	})
	send("message_stop", map[string]string{"type": "message_stop"})
}

// chunks splits s into pieces of about size bytes, on rune boundaries.
func chunks(s string, size int) []string {
	var out []string
	for len(s) > size {
		cut := size
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(v) // plain structs and maps: cannot fail
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf.Bytes())
}

// writeAPIError answers in the Messages API's error shape.
func writeAPIError(w http.ResponseWriter, status int, errType, msg string) {
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": errType, "message": msg},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_scripted")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorType is the API's error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
