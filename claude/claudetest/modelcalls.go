package claudetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"brainbot/toolspec"
)

// The directives that make the model call tools in turn one, as a model
// using a brain's own MCP tools does:
//
//   - "#call <tool> [JSON object]" answers a tool_use of <tool> (a full
//     name, mcp__<server>__<tool>) with the object as its input ({} when
//     none follows). Several "#call"s make parallel calls in one message.
//     When their results come back, the model answers ToolsReplyPrefix and
//     each result: "<tool> said: <text>" or, for an error result,
//     "<tool> failed: <text>", joined by "; ".
//   - "#loop <tool> [JSON object]" calls the tool and, after every result,
//     calls it again: only the CLI's --max-turns ends the turn.

// ToolsReplyPrefix starts the answer to the results of "#call"s.
const ToolsReplyPrefix = "Tool results: "

// The question with options ("#ask"): the model writes AskPreamble, then
// calls toolspec.QuestionTool with the JSON object after "#ask", or with
// DefaultQuestion when none follows; the tool's result is answered
// DoneReply, as any other call of ours.
const AskPreamble = "Let me ask you something first."

// DefaultQuestion is what "#ask" alone asks.
var DefaultQuestion = toolspec.QuestionArgs{Question: "Which city?", Options: []string{"Paris", "Rome", "Lisbon"}}

// askCall is the question "#ask" asks, with the object after it, if any.
func askCall(text string) toolUse {
	call := directiveCall(toolspec.QuestionTool + " " + text[strings.Index(text, "#ask")+len("#ask"):])
	if string(call.input) == "{}" {
		call.input, _ = json.Marshal(DefaultQuestion) // strings only: cannot fail
	}
	return call
}

// directiveCalls are the calls of every "#call" and "#loop" in text, in
// order.
func directiveCalls(text string) []toolUse {
	var calls []toolUse
	for _, directive := range []string{"#call ", "#loop "} {
		rest := text
		for {
			i := strings.Index(rest, directive)
			if i < 0 {
				break
			}
			rest = rest[i+len(directive):]
			calls = append(calls, directiveCall(rest))
		}
	}
	return calls
}

// directiveCall reads "<tool> [JSON object]" at the start of text.
func directiveCall(text string) toolUse {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return toolUse{name: "", input: json.RawMessage(`{}`)}
	}
	name := fields[0]
	after := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), name))
	input := json.RawMessage(`{}`)
	if strings.HasPrefix(after, "{") {
		var obj map[string]any
		if json.NewDecoder(strings.NewReader(after)).Decode(&obj) == nil {
			input, _ = json.Marshal(obj) // decoded from JSON: cannot fail
		}
	}
	return toolUse{name: name, input: input}
}

// answerToolResults answers a message carrying tool results: another
// round of a "#loop", the results of "#call"s, or DoneReply for any other
// call (our file tools' in turn two).
func answerToolResults(msgs []Message) answer {
	own := lastOwnText(msgs)
	switch {
	case strings.Contains(own, "#loop "):
		return answer{tools: directiveCalls(own[strings.Index(own, "#loop "):])}
	case !strings.Contains(own, "#call "):
		return answer{text: DoneReply}
	}
	names := toolNames(msgs)
	var said []string
	for _, b := range msgs[len(msgs)-1].Content {
		name := names[b.ToolUseID]
		if b.Type != "tool_result" || name == "" || name == toolspec.SpeechTool || name == toolspec.ImageTool {
			continue
		}
		verb := "said"
		if b.IsError {
			verb = "failed"
		}
		said = append(said, fmt.Sprintf("%s %s: %s", name, verb, resultText(b.Content)))
	}
	if len(said) == 0 {
		return answer{text: DoneReply}
	}
	return answer{text: ToolsReplyPrefix + strings.Join(said, "; ")}
}

// lastOwnText is the text of the user's latest own message.
func lastOwnText(msgs []Message) string {
	for _, m := range slices.Backward(msgs) {
		if text, ok := isUserMessage(m); ok {
			return text
		}
	}
	return ""
}

// toolNames maps the ids of the conversation's tool_use blocks to their
// tools.
func toolNames(msgs []Message) map[string]string {
	names := map[string]string{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				names[b.ID] = b.Name
			}
		}
	}
	return names
}

// resultText flattens a tool_result's content: a string, or blocks whose
// text parts are joined with newlines.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []Block
	_ = json.Unmarshal(raw, &blocks) // malformed: no text
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}
