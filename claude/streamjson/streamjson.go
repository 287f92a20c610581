// Package streamjson is the Claude Code CLI's stream-json protocol as
// brainbot reads it: the events of the CLI's stdout, one JSON object a
// line, and the control request that interrupts a turn. It starts no
// process: the driver hands it the lines.
package streamjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// kind classifies one stdout line of the CLI.
type Kind uint8

const (
	// KindOther is a line the driver skips: a type it does not use
	// (system/status, rate_limit_event, stream_event, hook events, types
	// newer than this code). Skipped lines are counted, never an error.
	KindOther Kind = iota
	// KindInit is system/init, re-emitted at the start of every turn.
	KindInit
	// KindAssistant is a model message: text and tool_use blocks.
	KindAssistant
	// KindUser is a user message as the CLI echoes it: tool_result blocks.
	KindUser
	// KindPermissionDenied is system/permission_denied: a tool call refused
	// because the tool is not in --allowedTools.
	KindPermissionDenied
	// KindResult ends a turn.
	KindResult
	// KindTextStart opens a text block, and KindTextDelta carries a piece
	// of its text, as the model writes it (stream_event lines, with
	// --include-partial-messages).
	KindTextStart
	KindTextDelta
	// KindLifecycle is command_lifecycle: the CLI's word on a stdin
	// message that carries a uuid (Request.MessageID). Its "completed"
	// comes after the turn's result, so a warm process's next request
	// reads it first: it is neither a sign of life of that request (see
	// the stale check in Driver.run) nor an unknown event.
	KindLifecycle
)

func (k Kind) String() string {
	switch k {
	case KindInit:
		return "init"
	case KindAssistant:
		return "assistant"
	case KindUser:
		return "user"
	case KindPermissionDenied:
		return "permission_denied"
	case KindResult:
		return "result"
	case KindTextStart:
		return "text_start"
	case KindTextDelta:
		return "text_delta"
	case KindLifecycle:
		return "lifecycle"
	}
	return "other"
}

// event is the part of one stdout line the driver uses.
type Event struct {
	Kind Kind
	// Type and Subtype are the line's "type" and "subtype" as sent.
	Type, Subtype string
	// SessionID is the line's top-level session_id (empty when absent).
	SessionID string
	// Blocks are the message content blocks of KindAssistant (text,
	// tool_use) and KindUser (tool_result) lines, in order.
	Blocks []Block
	// Servers are the MCP servers a KindInit line reports, with their
	// status.
	Servers []ServerStatus
	// Denial is set for KindPermissionDenied.
	Denial Denial
	// Delta is the text of a KindTextDelta.
	Delta string
	// Result is set for KindResult.
	Result *TurnResult
}

// block is one message content block.
type Block struct {
	// Type is "text", "tool_use", "tool_result", or another block type
	// (e.g. "thinking"), kept with no other fields.
	Type string
	// Text is a text block's text, or a tool_result's text content (text
	// parts joined with "\n" when the content is a list).
	Text string
	// ID, Name and Input describe a tool_use; Input is the raw JSON
	// arguments (a copy, safe to keep).
	ID    string
	Name  string
	Input json.RawMessage
	// ToolUseID and IsError describe a tool_result.
	ToolUseID string
	IsError   bool
}

// denial names a tool call the CLI refused (system/permission_denied, or an
// entry of a result's permission_denials).
type Denial struct {
	ToolName  string
	ToolUseID string
	// Message is the CLI's explanation (permission_denied lines only).
	Message string
}

// ServerStatus is an entry of system/init's mcp_servers.
type ServerStatus struct {
	Name string
	// Status is "connected" for a server whose tools the model has;
	// "failed" for one that did not start or answer.
	Status string
}

// TurnResult is the "result" line that ends a turn.
type TurnResult struct {
	// Subtype is "success", "error_during_execution", "error_max_turns"...
	// An API error has subtype "success" with IsError true: only IsError
	// tells whether the turn failed.
	Subtype string
	IsError bool
	// Text is the "result" field (null becomes "").
	Text       string
	CostUSD    float64 // total_cost_usd: the process's running total
	Tokens     Tokens  // usage: this turn's alone
	DurationMS int64   // duration_ms
	NumTurns   int     // num_turns
	Errors     []string
	Denials    []Denial // permission_denials
	// Structured is structured_output, the answer of a --json-schema
	// request (absent or null: nil).
	Structured json.RawMessage
}

// object is one JSON object's members by exact key. Decoding into a map,
// not a struct, keeps encoding/json from matching keys case-insensitively:
// "Type" is not "type".
type object map[string]json.RawMessage

// asObject decodes raw as an object; anything else (absent, null, another
// type) gives nil.
func asObject(raw json.RawMessage) object {
	var o object
	if json.Unmarshal(raw, &o) != nil {
		return nil
	}
	return o
}

// str is the string member key, or "" when it is absent or not a string.
func (o object) str(key string) string {
	var s string
	_ = json.Unmarshal(o[key], &s) // absent or another type: ""
	return s
}

// value decodes member key into v, leaving v as it is when the member is
// absent or of another JSON type.
func (o object) value(key string, v any) {
	_ = json.Unmarshal(o[key], v)
}

// Parse decodes one stdout line (surrounding white space, including a
// trailing "\r", is ignored). A line that is not exactly one JSON object is
// a *ProtocolError; a valid object of a type the driver does not use is an
// event of KindOther, not an error. Fields of the wrong JSON type are
// treated as absent. The returned event does not alias line.
func Parse(line []byte) (Event, error) {
	if trimmed := bytes.TrimLeft(line, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return Event{}, &ProtocolError{Err: errors.New("not a JSON object")}
	}
	var top object
	if err := json.Unmarshal(line, &top); err != nil {
		return Event{}, &ProtocolError{Err: err}
	}
	ev := Event{Type: top.str("type"), Subtype: top.str("subtype"), SessionID: top.str("session_id")}
	switch ev.Type {
	case "system":
		switch ev.Subtype {
		case "init":
			ev.Kind = KindInit
			for _, raw := range elements(top["mcp_servers"]) {
				if o := asObject(raw); o != nil {
					ev.Servers = append(ev.Servers, ServerStatus{Name: o.str("name"), Status: o.str("status")})
				}
			}
		case "permission_denied":
			ev.Kind = KindPermissionDenied
			// message is a string here, not an object.
			ev.Denial = Denial{ToolName: top.str("tool_name"), ToolUseID: top.str("tool_use_id"), Message: top.str("message")}
		}
	case "assistant", "user":
		ev.Kind = KindUser
		if ev.Type == "assistant" {
			ev.Kind = KindAssistant
		}
		ev.Blocks = contentBlocks(asObject(top["message"]))
	case "result":
		ev.Kind = KindResult
		ev.Result = top.TurnResult(ev.Subtype)
	case "command_lifecycle":
		ev.Kind = KindLifecycle
	case "stream_event":
		streamEvent(asObject(top["event"]), &ev)
	}
	return ev, nil
}

// streamEvent reads the raw API event of a stream_event line: the start of
// a text block, or a piece of its text. Other events stay KindOther.
func streamEvent(raw object, ev *Event) {
	switch raw.str("type") {
	case "content_block_start":
		if asObject(raw["content_block"]).str("type") == "text" {
			ev.Kind = KindTextStart
		}
	case "content_block_delta":
		if delta := asObject(raw["delta"]); delta.str("type") == "text_delta" {
			ev.Kind, ev.Delta = KindTextDelta, delta.str("text")
		}
	}
}

func (o object) TurnResult(subtype string) *TurnResult {
	r := &TurnResult{Subtype: subtype, Text: o.str("result")}
	o.value("is_error", &r.IsError)
	o.value("total_cost_usd", &r.CostUSD)
	o.value("duration_ms", &r.DurationMS)
	o.value("num_turns", &r.NumTurns)
	if raw := o["structured_output"]; len(raw) > 0 && string(raw) != "null" {
		r.Structured = append(json.RawMessage(nil), raw...)
	}
	if u := asObject(o["usage"]); u != nil {
		u.value("input_tokens", &r.Tokens.Input)
		u.value("output_tokens", &r.Tokens.Output)
		u.value("cache_read_input_tokens", &r.Tokens.CacheRead)
		u.value("cache_creation_input_tokens", &r.Tokens.CacheWrite)
	}
	if r.Tokens == (Tokens{}) {
		// An interrupted turn's result has zeros in usage (checked on
		// 2.1.328); what the model did spend is per model here.
		r.Tokens = modelUsage(asObject(o["model_usage_since_last_result"]))
	}
	for _, raw := range elements(o["errors"]) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			r.Errors = append(r.Errors, s)
		}
	}
	for _, raw := range elements(o["permission_denials"]) {
		if d := asObject(raw); d != nil {
			r.Denials = append(r.Denials, Denial{ToolName: d.str("tool_name"), ToolUseID: d.str("tool_use_id")})
		}
	}
	return r
}

// modelUsage adds up the tokens of a result's per-model usage
// ({"<model>":{"inputTokens":...}}).
func modelUsage(models object) Tokens {
	var t Tokens
	for _, raw := range models {
		var one struct {
			Input      int64 `json:"inputTokens"`
			Output     int64 `json:"outputTokens"`
			CacheRead  int64 `json:"cacheReadInputTokens"`
			CacheWrite int64 `json:"cacheCreationInputTokens"`
		}
		if json.Unmarshal(raw, &one) == nil {
			t.Input, t.Output = t.Input+one.Input, t.Output+one.Output
			t.CacheRead, t.CacheWrite = t.CacheRead+one.CacheRead, t.CacheWrite+one.CacheWrite
		}
	}
	return t
}

// elements is the elements of raw when it is a list.
func elements(raw json.RawMessage) []json.RawMessage {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	return list
}

// contentBlocks decodes message.content when it is a list of blocks.
func contentBlocks(message object) []Block {
	var blocks []Block
	for _, raw := range elements(message["content"]) {
		if b, ok := contentBlock(raw); ok {
			blocks = append(blocks, b)
		}
	}
	return blocks
}

// contentBlock keeps only the fields that belong to the block's type, so
// a malformed block cannot, say, give a text block a tool name.
func contentBlock(raw json.RawMessage) (Block, bool) {
	o := asObject(raw)
	if o == nil {
		return Block{}, false
	}
	b := Block{Type: o.str("type")}
	switch b.Type {
	case "text":
		b.Text = o.str("text")
	case "tool_use":
		b.ID, b.Name = o.str("id"), o.str("name")
		// A copy: encoding/json's RawMessage does not alias the line.
		b.Input = o["input"]
	case "tool_result":
		b.Text, b.ToolUseID = toolResultText(o["content"]), o.str("tool_use_id")
		o.value("is_error", &b.IsError)
	}
	return b, true
}

// toolResultText flattens a tool_result's content: a string, or a list of
// blocks whose text parts are joined with newlines.
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []string
	for _, el := range elements(raw) {
		if b, ok := contentBlock(el); ok && b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// MaxLineSize is the longest stdout line taken. A tool_use with a long
// text or a base64 payload makes long lines; 16 MiB is far above anything
// the CLI prints for our tools and still bounds memory.
const MaxLineSize = 16 << 20

// ParseLine is Parse of line n of the CLI's stdout, as its reader handed
// it: readErr, if set, is the reader's (a line longer than MaxLineSize is
// a *ProtocolError; other read errors are returned as they are), and a
// line that is not a JSON object is a *ProtocolError with its number.
func ParseLine(n int, line []byte, readErr error) (Event, error) {
	switch {
	case errors.Is(readErr, bufio.ErrTooLong):
		return Event{}, &ProtocolError{Line: n, Err: readErr}
	case readErr != nil:
		return Event{}, readErr
	}
	ev, err := Parse(line)
	var pe *ProtocolError
	if errors.As(err, &pe) {
		pe.Line = n
	}
	return ev, err
}

// Tokens counts what a turn used of the model.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite int64
}

// ProtocolError is a stdout line that is not one JSON object: the framing
// of the stream is broken, so nothing after it can be trusted.
type ProtocolError struct {
	Line int // 1-based line number; 0 when parsing a single line
	Err  error
}

func (e *ProtocolError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("claude: broken stream-json on stdout line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("claude: broken stream-json: %v", e.Err)
}

func (e *ProtocolError) Unwrap() error { return e.Err }
