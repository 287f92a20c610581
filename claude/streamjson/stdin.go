package streamjson

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
)

// What brainbot writes to the CLI's stdin: a user's message, and the
// control request that interrupts a turn.

// userLine is one stdin message in the CLI's stream-json input format.
type userLine struct {
	Type string `json:"type"`
	// UUID names the message in the session's transcript (omitted: the
	// CLI picks one).
	UUID            string      `json:"uuid,omitempty"`
	Message         userMessage `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	SessionID       string      `json:"session_id"`
}

type userMessage struct {
	Role string `json:"role"`
	// Content holds TextBlock and FileBlock values.
	Content []any `json:"content"`
}

// TextBlock is a text content block.
type TextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// FileBlock is an image or document content block.
type FileBlock struct {
	Type   string     `json:"type"`
	Source FileSource `json:"source"`
	Title  string     `json:"title,omitempty"`
}

// FileSource is a FileBlock's data.
type FileSource struct {
	// Type is base64, or text for a plain-text document.
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// UserLine is a user's message of content (TextBlock and FileBlock
// values) as one stdin line, newline included; id names it in the
// session's transcript ("": the CLI picks one).
func UserLine(id string, content []any) ([]byte, error) {
	line, err := json.Marshal(userLine{Type: "user", UUID: id, Message: userMessage{Role: "user", Content: content}})
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// InterruptLine is the control request that stops the turn the CLI is
// running (a bare interrupt message is ignored): the turn ends with its
// result line, and the process goes on.
func InterruptLine() []byte {
	return fmt.Appendf(nil, `{"type":"control_request","request_id":"interrupt-%s","request":{"subtype":"interrupt"}}`+"\n", rand.Text())
}
