package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
)

// kind classifies one stdout line of the CLI.
type kind uint8

const (
	// kindOther is a line the driver skips: a type it does not use
	// (system/status, rate_limit_event, stream_event, hook events, types
	// newer than this code). Skipped lines are counted, never an error.
	kindOther kind = iota
	// kindInit is system/init, re-emitted at the start of every turn.
	kindInit
	// kindAssistant is a model message: text and tool_use blocks.
	kindAssistant
	// kindUser is a user message as the CLI echoes it: tool_result blocks.
	kindUser
	// kindPermissionDenied is system/permission_denied: a tool call refused
	// because the tool is not in --allowedTools.
	kindPermissionDenied
	// kindResult ends a turn.
	kindResult
)

func (k kind) String() string {
	switch k {
	case kindInit:
		return "init"
	case kindAssistant:
		return "assistant"
	case kindUser:
		return "user"
	case kindPermissionDenied:
		return "permission_denied"
	case kindResult:
		return "result"
	}
	return "other"
}

// event is the part of one stdout line the driver uses.
type event struct {
	Kind kind
	// Type and Subtype are the line's "type" and "subtype" as sent.
	Type, Subtype string
	// SessionID is the line's top-level session_id (empty when absent).
	SessionID string
	// Blocks are the message content blocks of kindAssistant (text,
	// tool_use) and kindUser (tool_result) lines, in order.
	Blocks []block
	// Denial is set for kindPermissionDenied.
	Denial denial
	// Result is set for kindResult.
	Result *turnResult
}

// block is one message content block.
type block struct {
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
type denial struct {
	ToolName  string
	ToolUseID string
	// Message is the CLI's explanation (permission_denied lines only).
	Message string
}

// turnResult is the "result" line that ends a turn.
type turnResult struct {
	// Subtype is "success", "error_during_execution", "error_max_turns"...
	// An API error has subtype "success" with IsError true: only IsError
	// tells whether the turn failed.
	Subtype string
	IsError bool
	// Text is the "result" field (null becomes "").
	Text       string
	CostUSD    float64 // total_cost_usd
	DurationMS int64   // duration_ms
	NumTurns   int     // num_turns
	Errors     []string
	Denials    []denial // permission_denials
}

// parseEvent decodes one stdout line (surrounding white space, including a
// trailing "\r", is ignored). A line that is not exactly one JSON object is
// a *protocolError; a valid object of a type the driver does not use is an
// Event of kindOther, not an error. Fields of the wrong JSON type are
// treated as absent. The returned Event does not alias line.
func parseEvent(line []byte) (event, error) {
	var ev event
	var message, result []byte
	var top topLevel
	err := members(line, func(key, val []byte) error {
		switch string(key) {
		case "type":
			ev.Type = internType(val)
		case "subtype":
			ev.Subtype, _ = stringValue(val)
		case "session_id":
			ev.SessionID, _ = stringValue(val)
		case "message":
			message = val
		case "result":
			result = val
		default:
			top.remember(key, val)
		}
		return nil
	})
	if err != nil {
		return event{}, &protocolError{Err: err}
	}
	switch ev.Type {
	case "system":
		switch ev.Subtype {
		case "init":
			ev.Kind = kindInit
		case "permission_denied":
			ev.Kind = kindPermissionDenied
			ev.Denial = denial{
				ToolName:  str(top.toolName),
				ToolUseID: str(top.toolUseID),
				Message:   str(message), // a string here, not an object
			}
		}
	case "assistant", "user":
		ev.Kind = kindUser
		if ev.Type == "assistant" {
			ev.Kind = kindAssistant
		}
		ev.Blocks = contentBlocks(message)
	case "result":
		ev.Kind = kindResult
		ev.Result = top.turnResult(ev.Subtype, result)
	}
	return ev, nil
}

// internType avoids allocating for the type names every line carries.
func internType(raw []byte) string {
	for _, known := range [...]string{`"system"`, `"assistant"`, `"user"`, `"result"`} {
		if string(raw) == known {
			return known[1 : len(known)-1]
		}
	}
	s, _ := stringValue(raw)
	return s
}

// topLevel holds the raw values of the top-level members that only some
// line types use; they are decoded once the type is known.
type topLevel struct {
	isError, cost, duration, numTurns, errors, denials []byte
	toolName, toolUseID                                []byte
}

func (t *topLevel) remember(key, val []byte) {
	switch string(key) {
	case "is_error":
		t.isError = val
	case "total_cost_usd":
		t.cost = val
	case "duration_ms":
		t.duration = val
	case "num_turns":
		t.numTurns = val
	case "errors":
		t.errors = val
	case "permission_denials":
		t.denials = val
	case "tool_name":
		t.toolName = val
	case "tool_use_id":
		t.toolUseID = val
	}
}

// str is stringValue for fields where "absent" and "not a string" mean
// the same: empty.
func str(raw []byte) string {
	s, _ := stringValue(raw)
	return s
}

func (t *topLevel) turnResult(subtype string, result []byte) *turnResult {
	r := &turnResult{Subtype: subtype, IsError: string(t.isError) == "true"}
	r.Text, _ = stringValue(result)
	r.CostUSD, _ = strconv.ParseFloat(string(t.cost), 64)
	r.DurationMS, _ = strconv.ParseInt(string(t.duration), 10, 64)
	r.NumTurns, _ = strconv.Atoi(string(t.numTurns))
	_ = elements(t.errors, func(val []byte) error {
		if s, ok := stringValue(val); ok {
			r.Errors = append(r.Errors, s)
		}
		return nil
	})
	_ = elements(t.denials, func(val []byte) error {
		var d topLevel
		if members(val, func(key, val []byte) error { d.remember(key, val); return nil }) == nil {
			r.Denials = append(r.Denials, denial{ToolName: str(d.toolName), ToolUseID: str(d.toolUseID)})
		}
		return nil
	})
	return r
}

// contentBlocks decodes message.content when it is a list of blocks.
func contentBlocks(message []byte) []block {
	var content []byte
	if members(message, func(key, val []byte) error {
		if string(key) == "content" {
			content = val
		}
		return nil
	}) != nil {
		return nil
	}
	var blocks []block
	_ = elements(content, func(val []byte) error {
		if b, ok := contentBlock(val); ok {
			blocks = append(blocks, b)
		}
		return nil
	})
	return blocks
}

func contentBlock(raw []byte) (block, bool) {
	var b block
	var content []byte
	err := members(raw, func(key, val []byte) error {
		switch string(key) {
		case "type":
			b.Type, _ = stringValue(val)
		case "text":
			b.Text, _ = stringValue(val)
		case "id":
			b.ID, _ = stringValue(val)
		case "name":
			b.Name, _ = stringValue(val)
		case "input":
			b.Input = bytes.Clone(val)
		case "tool_use_id":
			b.ToolUseID, _ = stringValue(val)
		case "is_error":
			b.IsError = string(val) == "true"
		case "content":
			content = val
		}
		return nil
	})
	if err != nil {
		return block{}, false
	}
	// Keep only the fields that belong to the block's type, so a
	// malformed block cannot, say, give a text block a tool name.
	switch b.Type {
	case "text":
		return block{Type: b.Type, Text: b.Text}, true
	case "tool_use":
		return block{Type: b.Type, ID: b.ID, Name: b.Name, Input: b.Input}, true
	case "tool_result":
		return block{Type: b.Type, Text: toolResultText(content), ToolUseID: b.ToolUseID, IsError: b.IsError}, true
	}
	return block{Type: b.Type}, true
}

// toolResultText flattens a tool_result's content: a string, or a list of
// blocks whose text parts are joined with newlines.
func toolResultText(raw []byte) string {
	if s, ok := stringValue(raw); ok {
		return s
	}
	var parts []string
	_ = elements(raw, func(val []byte) error {
		if b, ok := contentBlock(val); ok && b.Type == "text" {
			parts = append(parts, b.Text)
		}
		return nil
	})
	return strings.Join(parts, "\n")
}

// maxLineSize is the longest stdout line a Reader accepts. A tool_use with
// a long text or a base64 payload makes long lines; 16 MiB is far above
// anything the CLI prints for our tools and still bounds memory.
const maxLineSize = 16 << 20

// reader reads the CLI's stdout as a sequence of events.
type reader struct {
	sc   *bufio.Scanner
	line int
}

// newReader returns a Reader over r. It accepts "\n" and "\r\n" line ends
// and skips blank lines.
func newReader(r io.Reader) *reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineSize)
	return &reader{sc: sc}
}

// next returns the next event. It returns io.EOF at the end of input and a
// *protocolError (with its line number) for a line that is not a JSON
// object or is longer than maxLineSize; read errors are returned as is.
func (r *reader) next() (event, error) {
	for r.sc.Scan() {
		r.line++
		line := r.sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := parseEvent(line)
		if err != nil {
			var pe *protocolError
			if errors.As(err, &pe) {
				pe.Line = r.line
			}
			return event{}, err
		}
		return ev, nil
	}
	err := r.sc.Err()
	switch {
	case err == nil:
		return event{}, io.EOF
	case errors.Is(err, bufio.ErrTooLong):
		return event{}, &protocolError{Line: r.line + 1, Err: err}
	}
	return event{}, err
}
