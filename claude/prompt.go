package claude

import (
	"encoding/json"
	"fmt"

	"brainbot/toolspec"
)

// tool returns the MCP tool turn 2 of a request must call ("" for Text).
func (m Mode) tool() string {
	switch m {
	case Speech:
		return toolspec.SpeechTool
	case Image:
		return toolspec.ImageTool
	}
	return ""
}

// userLine is one stdin message in the CLI's stream-json input format.
type userLine struct {
	Type            string      `json:"type"`
	Message         userMessage `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	SessionID       string      `json:"session_id"`
}

type userMessage struct {
	Role    string      `json:"role"`
	Content []textBlock `json:"content"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// encodeUserLine returns text as one stdin line, newline included.
func encodeUserLine(text string) ([]byte, error) {
	line, err := json.Marshal(userLine{
		Type:    "user",
		Message: userMessage{Role: "user", Content: []textBlock{{Type: "text", Text: text}}},
	})
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// turn2Prompt is the message that makes Claude call the request's tool.
// The arguments travel as one JSON object produced by json.Marshal, on a
// line of its own, so the turn-1 text cannot break out of its quotes
// whatever it contains.
func turn2Prompt(req Request, turn1Text string) (string, error) {
	var args any
	var intro, extra string
	switch req.Mode {
	case Speech:
		intro = "Please call the " + toolspec.SpeechTool + " tool once to turn your previous reply into audio."
		args = toolspec.SpeechArgs{Text: turn1Text, SpeechSettings: speechSettings(req), Filename: req.FilePrefix}
	case Image:
		intro = "Please call the " + toolspec.ImageTool + " tool once to create the image the user asked for."
		extra = "Add the \"prompt\" argument yourself: write it from the user's request.\n"
		// No prompt: Claude writes it from the conversation.
		args = toolspec.ImageArgs{ImageSettings: req.Image, Filename: req.FilePrefix}
	default:
		return "", fmt.Errorf("claude: mode %v has no second turn", req.Mode)
	}
	js, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	return intro + "\nUse exactly these arguments (a JSON object):\n" + string(js) + "\n" + extra +
		"Only call the tool, no additional response.", nil
}

// speechSettings are the request's speech settings with the format the
// tool will use when the request names none.
func speechSettings(req Request) toolspec.SpeechSettings {
	s := req.Speech
	if s.Format == "" {
		s.Format = toolspec.DefaultFormat
	}
	return s
}

// fileExt is the extension the request's tool gives its file.
func fileExt(req Request) string {
	switch req.Mode {
	case Image:
		return toolspec.ImageExt
	case Speech:
		ext, _ := toolspec.SpeechExt(speechSettings(req).Format) // checked by checkRequest
		return ext
	}
	return ""
}
