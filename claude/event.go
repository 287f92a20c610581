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

// Kind classifies one stdout line of the CLI.
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
	}
	return "other"
}

// Event is the part of one stdout line the driver uses.
type Event struct {
	Kind Kind
	// Type and Subtype are the line's "type" and "subtype" as sent.
	Type, Subtype string
	// SessionID is the line's top-level session_id (empty when absent).
	SessionID string
	// Blocks are the message content blocks of KindAssistant (text,
	// tool_use) and KindUser (tool_result) lines, in order.
	Blocks []Block
	// Denial is set for KindPermissionDenied.
	Denial Denial
	// Result is set for KindResult.
	Result *TurnResult
}

// Block is one message content block.
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

// Denial names a tool call the CLI refused (system/permission_denied, or an
// entry of a result's permission_denials).
type Denial struct {
	ToolName  string
	ToolUseID string
	// Message is the CLI's explanation (permission_denied lines only).
	Message string
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
	CostUSD    float64 // total_cost_usd
	DurationMS int64   // duration_ms
	NumTurns   int     // num_turns
	Errors     []string
	Denials    []Denial // permission_denials
}

// ParseEvent decodes one stdout line (surrounding white space, including a
// trailing "\r", is ignored). A line that is not exactly one JSON object is
// a *ProtocolError; a valid object of a type the driver does not use is an
// Event of KindOther, not an error. Fields of the wrong JSON type are
// treated as absent. The returned Event does not alias line.
func ParseEvent(line []byte) (Event, error) {
	var ev Event
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
		return Event{}, &ProtocolError{Err: err}
	}
	switch ev.Type {
	case "system":
		switch ev.Subtype {
		case "init":
			ev.Kind = KindInit
		case "permission_denied":
			ev.Kind = KindPermissionDenied
			ev.Denial = Denial{
				ToolName:  str(top.toolName),
				ToolUseID: str(top.toolUseID),
				Message:   str(message), // a string here, not an object
			}
		}
	case "assistant", "user":
		ev.Kind = KindUser
		if ev.Type == "assistant" {
			ev.Kind = KindAssistant
		}
		ev.Blocks = contentBlocks(message)
	case "result":
		ev.Kind = KindResult
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

func (t *topLevel) turnResult(subtype string, result []byte) *TurnResult {
	r := &TurnResult{Subtype: subtype, IsError: string(t.isError) == "true"}
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
			r.Denials = append(r.Denials, Denial{ToolName: str(d.toolName), ToolUseID: str(d.toolUseID)})
		}
		return nil
	})
	return r
}

// contentBlocks decodes message.content when it is a list of blocks.
func contentBlocks(message []byte) []Block {
	var content []byte
	if members(message, func(key, val []byte) error {
		if string(key) == "content" {
			content = val
		}
		return nil
	}) != nil {
		return nil
	}
	var blocks []Block
	_ = elements(content, func(val []byte) error {
		if b, ok := contentBlock(val); ok {
			blocks = append(blocks, b)
		}
		return nil
	})
	return blocks
}

func contentBlock(raw []byte) (Block, bool) {
	var b Block
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
		return Block{}, false
	}
	// Keep only the fields that belong to the block's type, so a
	// malformed block cannot, say, give a text block a tool name.
	switch b.Type {
	case "text":
		return Block{Type: b.Type, Text: b.Text}, true
	case "tool_use":
		return Block{Type: b.Type, ID: b.ID, Name: b.Name, Input: b.Input}, true
	case "tool_result":
		return Block{Type: b.Type, Text: toolResultText(content), ToolUseID: b.ToolUseID, IsError: b.IsError}, true
	}
	return Block{Type: b.Type}, true
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

// MaxLineSize is the longest stdout line a Reader accepts. A tool_use with
// a long text or a base64 payload makes long lines; 16 MiB is far above
// anything the CLI prints for our tools and still bounds memory.
const MaxLineSize = 16 << 20

// Reader reads the CLI's stdout as a sequence of Events.
type Reader struct {
	sc   *bufio.Scanner
	line int
}

// NewReader returns a Reader over r. It accepts "\n" and "\r\n" line ends
// and skips blank lines.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineSize)
	return &Reader{sc: sc}
}

// Next returns the next event. It returns io.EOF at the end of input and a
// *ProtocolError (with its line number) for a line that is not a JSON
// object or is longer than MaxLineSize; read errors are returned as is.
func (r *Reader) Next() (Event, error) {
	for r.sc.Scan() {
		r.line++
		line := r.sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := ParseEvent(line)
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				pe.Line = r.line
			}
			return Event{}, err
		}
		return ev, nil
	}
	err := r.sc.Err()
	switch {
	case err == nil:
		return Event{}, io.EOF
	case errors.Is(err, bufio.ErrTooLong):
		return Event{}, &ProtocolError{Line: r.line + 1, Err: err}
	}
	return Event{}, err
}
