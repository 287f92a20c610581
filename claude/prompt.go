package claude

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"brainbot/claude/streamjson"
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

// encodeUserLine returns text, after the files, as one stdin line, newline
// included. Files come first, as the Claude API advises for images; text
// that is empty beside files is left out (a photo without a caption). The
// text is always words to the CLI, never one of its commands (asWords):
// every line written to its stdin is made here. A note of brainbot's (the
// values of the system prompt's per-message variables, sysprompt.Note)
// opens the message as a text block of its own, so it is never part of
// the user's words. id names the message in the session's transcript
// ("": the CLI picks).
func encodeUserLine(id, note, text string, files ...Attachment) ([]byte, error) {
	content := make([]any, 0, len(files)+2)
	if note != "" {
		content = append(content, streamjson.TextBlock{Type: "text", Text: note})
	}
	for _, f := range files {
		b, err := attachmentBlock(f)
		if err != nil {
			return nil, err
		}
		content = append(content, b)
	}
	if text != "" || len(files) == 0 {
		content = append(content, streamjson.TextBlock{Type: "text", Text: asWords(text)})
	}
	return streamjson.UserLine(id, content)
}

// asWords keeps text from reading as a command of the CLI. The CLI
// (2.1.328, checked) takes a stream-json message whose last text block
// starts with "/" for one of its slash commands and runs it without asking
// the model: a caption "/insights", a "/config model=haiku" Telegram did
// not mark as a bot command, a group message whose sender is named
// "/heapdump". Run with --disable-slash-commands it answers "/<name> isn't
// available in this environment." instead, and the model still never sees
// the words. Any other first character makes the CLI pass the text on as
// it is (a space, a tab, a newline and a zero-width space were checked; a
// text block of our own before the user's was not enough). A space is the
// one a model reading " /insights" notices least: the user's words,
// unchanged.
func asWords(text string) string {
	if strings.HasPrefix(text, "/") {
		return " " + text
	}
	return text
}

// attachmentBlock is the content block that carries f. The CLI (2.1.328,
// checked) passes image and document blocks of a stream-json message on to
// the model as they are, and keeps them in the session for resumes.
func attachmentBlock(f Attachment) (streamjson.FileBlock, error) {
	switch f.MediaType {
	case "image/jpeg", "image/png", "image/gif", "image/webp":
		return streamjson.FileBlock{Type: "image", Source: base64Source(f)}, nil
	case "application/pdf":
		return streamjson.FileBlock{Type: "document", Source: base64Source(f), Title: f.Name}, nil
	case "text/plain":
		if !utf8.Valid(f.Data) {
			return streamjson.FileBlock{}, fmt.Errorf("claude: text attachment %q is not UTF-8", f.Name)
		}
		return streamjson.FileBlock{Type: "document", Source: streamjson.FileSource{Type: "text", MediaType: f.MediaType, Data: string(f.Data)}, Title: f.Name}, nil
	}
	return streamjson.FileBlock{}, fmt.Errorf("claude: attachment %q: media type %q is not one the model reads", f.Name, f.MediaType)
}

func base64Source(f Attachment) streamjson.FileSource {
	return streamjson.FileSource{Type: "base64", MediaType: f.MediaType, Data: base64.StdEncoding.EncodeToString(f.Data)}
}

// turn2Prompt is the message that makes Claude call the request's tool.
// The arguments travel as one JSON object produced by json.Marshal, on a
// line of its own, so the turn-1 text cannot break out of its quotes
// whatever it contains.
//
// With spoken (the answer is spoken already, while turn one streamed)
// the call carries only the file name and a short stand-in for the text:
// the model would otherwise write the whole answer again, at its pace,
// for a text the tool does not use.
func turn2Prompt(req Request, turn1Text string, spoken bool) (string, error) {
	var args any
	var intro, extra string
	switch {
	case req.Mode == Speech && spoken:
		intro = turn2Intro(toolspec.SpeechTool, "turn your previous reply into audio")
		args = struct {
			Text     string `json:"text"`
			Filename string `json:"filename"`
		}{spokenStandIn, req.FilePrefix}
	case req.Mode == Speech:
		intro = turn2Intro(toolspec.SpeechTool, "turn your previous reply into audio")
		args = toolspec.SpeechArgs{Text: turn1Text, SpeechSettings: speechSettings(req), Filename: req.FilePrefix}
	case req.Mode == Image:
		intro = turn2Intro(toolspec.ImageTool, "create the image the user asked for")
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
	return intro + turn2Arguments + string(js) + "\n" + extra + turn2Closing, nil
}

// The parts of turn2Prompt, which turn2Call recognises again.
const (
	turn2Arguments = "\nUse exactly these arguments (a JSON object):\n"
	turn2Closing   = "Only call the tool, no additional response."
)

func turn2Intro(tool, what string) string {
	return "Please call the " + tool + " tool once to " + what + "."
}

// turn2Pattern matches a whole turn2Prompt: the tool it names, and the
// arguments with the file name of a request's prefix.
var turn2Pattern = regexp.MustCompile(`\APlease call the (mcp__[a-z0-9_-]+__[a-z0-9_]+) tool once to [^\n]*\.` +
	regexp.QuoteMeta(turn2Arguments) + `\{.*"filename":"bot-[a-z0-9_-]+-user--?[0-9]+-[0-9]+".*\}\n(?:[^\n]*\n)?` +
	regexp.QuoteMeta(turn2Closing) + `\z`)

// turn2Call is the tool a turn-two prompt text asks for; ok is false for
// any other text.
func turn2Call(text string) (tool string, ok bool) {
	m := turn2Pattern.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// spokenStandIn is the text argument of a speech call whose speech was
// made while turn one streamed.
const spokenStandIn = "(my previous reply)"

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
