package claude

import (
	"encoding/json"
	"fmt"
)

// The MCP tools of the two-turn flows, as Claude Code names them
// (mcp__<server in mcp.json>__<tool>).
const (
	SpeechTool = "mcp__tts__text_to_speech"
	ImageTool  = "mcp__image-gen__generate_image"
)

// tool returns the MCP tool turn 2 of a request must call ("" for Text).
func (m Mode) tool() string {
	switch m {
	case Speech:
		return SpeechTool
	case Image:
		return ImageTool
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

// speechArgs are the text_to_speech arguments (see package mcp).
type speechArgs struct {
	Text          string  `json:"text"`
	Voice         string  `json:"voice,omitempty"`
	Speed         float64 `json:"speed,omitempty"`
	Model         string  `json:"model,omitempty"`
	Format        string  `json:"format"`
	Filename      string  `json:"filename"`
	IncludeBase64 bool    `json:"include_base64"`
}

// imageArgs are the generate_image arguments except the prompt, which
// Claude writes from the conversation.
type imageArgs struct {
	Model         string `json:"model,omitempty"`
	Size          string `json:"size,omitempty"`
	Quality       string `json:"quality,omitempty"`
	Style         string `json:"style,omitempty"`
	Filename      string `json:"filename"`
	IncludeBase64 bool   `json:"include_base64"`
}

// turn2Prompt is the message that makes Claude call the request's tool.
// The arguments travel as one JSON object produced by json.Marshal, on a
// line of its own, so the turn-1 text cannot break out of its quotes
// whatever it contains.
func turn2Prompt(req Request, turn1Text, prefix string) (string, error) {
	var args any
	var intro, extra string
	switch req.Mode {
	case Speech:
		intro = "Please call the " + SpeechTool + " tool once to turn your previous reply into audio."
		args = speechArgs{
			Text:     turn1Text,
			Voice:    req.Speech.Voice,
			Speed:    req.Speech.Speed,
			Model:    req.Speech.Model,
			Format:   speechFormat(req.Speech),
			Filename: prefix,
		}
	case Image:
		intro = "Please call the " + ImageTool + " tool once to create the image the user asked for."
		extra = "Add the \"prompt\" argument yourself: write it from the user's request.\n"
		args = imageArgs{
			Model:    req.Image.Model,
			Size:     req.Image.Size,
			Quality:  req.Image.Quality,
			Style:    req.Image.Style,
			Filename: prefix,
		}
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

func speechFormat(o SpeechOptions) string {
	if o.Format == "" {
		return "mp3"
	}
	return o.Format
}

// fileExt is the extension the request's tool gives its file.
func fileExt(req Request) string {
	switch {
	case req.Mode == Image:
		return ".png"
	case req.Mode == Speech && speechFormat(req.Speech) == "opus":
		return ".ogg"
	case req.Mode == Speech:
		return ".mp3"
	}
	return ""
}

// toolOutput is the JSON our MCP tools answer with.
type toolOutput struct {
	Success   bool   `json:"success"`
	AudioPath string `json:"audio_path"`
	ImagePath string `json:"image_path"`
	Error     string `json:"error"`
}
