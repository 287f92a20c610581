package claude

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Turn is one speaker's part of a session's transcript, as an admin
// reads it: what the user (or brainbot, for them) sent, or what the model
// answered, with the tools it called and the files they reported.
type Turn struct {
	// Role is "user", "assistant", or "brainbot": its own request of the
	// model (turn two's tool call), written in its stead.
	Role string    `json:"role"`
	Time time.Time `json:"time"`
	Text string    `json:"text,omitempty"`
	// Tools are the tools the model called in the turn, in order.
	Tools []string `json:"tools,omitempty"`
	// Files are the paths the tools' results reported (a voice note, a
	// picture), in order.
	Files []string `json:"files,omitempty"`
}

// transcriptLine is what ReadTranscript reads of one line of the CLI's
// session JSONL; every other kind of line (queue operations, attachments,
// API requests, costs) is the CLI's bookkeeping.
type transcriptLine struct {
	Type        string    `json:"type"`
	IsMeta      bool      `json:"isMeta"`
	IsSidechain bool      `json:"isSidechain"`
	Timestamp   time.Time `json:"timestamp"`
	Message     struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// transcriptBlock is one block of a message's content.
type transcriptBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`    // tool_use
	Content json.RawMessage `json:"content"` // tool_result: a string or blocks
}

// maxTranscriptLine bounds one line of a transcript: a tool's result
// may carry a picture in base64.
const maxTranscriptLine = 64 << 20

// ReadTranscript reads the CLI's transcript of a session (SessionFile)
// into its turns, in order: a tool's result belongs to the model's turn
// that called the tool. Lines it cannot read are skipped: the CLI adds
// kinds of lines from version to version.
func ReadTranscript(path string) ([]Turn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	defer f.Close()
	var turns []Turn
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxTranscriptLine)
	for sc.Scan() {
		var l transcriptLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.IsMeta || l.IsSidechain || (l.Type != "user" && l.Type != "assistant") {
			continue
		}
		turns = addToTurns(turns, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read transcript %s: %w", path, err)
	}
	return turns, nil
}

// addToTurns adds line l to turns: a new turn when the speaker changes,
// the model's tool results and later text to its turn.
func addToTurns(turns []Turn, l transcriptLine) []Turn {
	var text string
	var blocks []transcriptBlock
	if json.Unmarshal(l.Message.Content, &text) != nil {
		_ = json.Unmarshal(l.Message.Content, &blocks) // neither: no content
	}
	if text != "" {
		blocks = append(blocks, transcriptBlock{Type: "text", Text: text})
	}
	role := l.Type
	if len(blocks) > 0 && blocks[0].Type == "tool_result" {
		role = "assistant" // the result of the model's own call
	}
	if tool, ok := brainbotsRequest(l.Type, blocks); ok {
		role, blocks = "brainbot", []transcriptBlock{{Type: "text", Text: "(asked the model to call " + tool + " for the answer's file)"}}
	}
	if len(turns) == 0 || turns[len(turns)-1].Role != role {
		turns = append(turns, Turn{Role: role, Time: l.Timestamp})
	}
	t := &turns[len(turns)-1]
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if s := strings.TrimSpace(b.Text); s != "" {
				t.Text = strings.TrimSpace(t.Text + "\n\n" + s)
			}
		case "tool_use":
			t.Tools = append(t.Tools, b.Name)
		case "tool_result":
			t.Files = append(t.Files, reportedFiles(b.Content)...)
		}
	}
	return turns
}

// brainbotsRequest: a user line whose one text is brainbot's turn-two
// prompt, which is no word of the user's; tool is what it asks for.
func brainbotsRequest(lineType string, blocks []transcriptBlock) (tool string, ok bool) {
	if lineType != "user" || len(blocks) != 1 || blocks[0].Type != "text" {
		return "", false
	}
	return turn2Call(blocks[0].Text)
}

// reportedFiles are the paths a tool's result reports: our tools answer
// JSON with fields named *_path (image_path, audio_path).
func reportedFiles(content json.RawMessage) []string {
	var texts []string
	var s string
	var blocks []transcriptBlock
	switch {
	case json.Unmarshal(content, &s) == nil:
		texts = []string{s}
	case json.Unmarshal(content, &blocks) == nil:
		for _, b := range blocks {
			texts = append(texts, b.Text)
		}
	}
	var files []string
	for _, text := range texts {
		var fields map[string]any
		if json.Unmarshal([]byte(text), &fields) != nil {
			continue
		}
		var names []string
		for name, v := range fields {
			if p, ok := v.(string); ok && p != "" && strings.HasSuffix(name, "_path") {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			files = append(files, fields[name].(string))
		}
	}
	return files
}
