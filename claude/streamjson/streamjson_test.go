package streamjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"brainbot/toolspec"
)

// Lines printed by Claude Code 2.1.328 (captured against a loopback API
// answering HTTP 400, and a resume of an unknown session), shortened where
// marked.
const (
	realInit           = `{"type":"system","subtype":"init","cwd":"/tmp/cliexp/wd","session_id":"0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5b","tools":[],"mcp_servers":[],"model":"claude-opus-5-5","permissionMode":"dontAsk","slash_commands":["deep-research","dataviz","update-config"],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.328","output_style":"default","agents":["claude","Explore"],"plugins":[{"name":"cc-plugin-agents-md","path":"builtin","source":"cc-plugin-agents-md@builtin"}],"analytics_disabled":true,"uuid":"23ef05b3-4e2e-40da-be48-f6badc6d1b02","memory_paths":{"auto":"/tmp/cliexp/home/.claude/projects/-tmp-cliexp-wd/memory/"},"fast_mode_state":"off"}`
	realAPIErrorText   = `{"type":"assistant","message":{"diagnostics":null,"id":"e4dcb625-f010-4bcb-99aa-faecb03d17f2","container":null,"model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","stop_sequence":"","type":"message","usage":{"output_tokens_details":null,"input_tokens":0,"output_tokens":0},"content":[{"type":"text","text":"API Error: 400 bad thing"}],"context_management":null},"parent_tool_use_id":null,"session_id":"0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5b","uuid":"9b1c5294-ea45-4b67-be21-dffb9a739ff8","error":"unknown","is_api_error_message":true,"api_error_status":400}`
	realAPIErrorResult = `{"duration_api_ms":0,"stop_reason":"stop_sequence","session_id":"0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5b","total_cost_usd":0,"usage":{"input_tokens":0,"server_tool_use":{"web_search_requests":0}},"modelUsage":{},"permission_denials":[],"terminal_reason":"api_error","is_error":true,"num_turns":1,"subtype":"success","api_error_status":400,"result":"API Error: 400 bad thing","type":"result","duration_ms":143,"uuid":"00d05810-3159-4d48-829d-7f7c353620fb"}`
	realUnknownResume  = `{"type":"result","subtype":"error_during_execution","duration_ms":0,"duration_api_ms":0,"is_error":true,"num_turns":0,"stop_reason":null,"session_id":"0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5a","total_cost_usd":0,"usage":{"input_tokens":0},"modelUsage":{},"permission_denials":[],"uuid":"90c31246-f4ed-4923-8d12-ce33a63f6a51","errors":["No conversation found with session ID: 0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5a"],"result_index":0}`
)

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name, line string
		want       Event
	}{
		{"init", realInit, Event{Kind: KindInit, Type: "system", Subtype: "init", SessionID: "0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5b"}},
		{"init with servers", `{"type":"system","subtype":"init","session_id":"s","mcp_servers":[{"name":"clock","source":"dynamic","status":"connected"},{"name":"broken","status":"failed"},7]}`,
			Event{Kind: KindInit, Type: "system", Subtype: "init", SessionID: "s", Servers: []ServerStatus{{"clock", "connected"}, {"broken", "failed"}}}},
		{"assistant text", realAPIErrorText, Event{Kind: KindAssistant, Type: "assistant", SessionID: "0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5b",
			Blocks: []Block{{Type: "text", Text: "API Error: 400 bad thing"}}}},
		{"api error result", realAPIErrorResult, Event{Kind: KindResult, Type: "result", Subtype: "success", SessionID: "0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5b",
			Result: &TurnResult{Subtype: "success", IsError: true, Text: "API Error: 400 bad thing", DurationMS: 143, NumTurns: 1}}},
		{"unknown resume", realUnknownResume, Event{Kind: KindResult, Type: "result", Subtype: "error_during_execution", SessionID: "0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5a",
			Result: &TurnResult{Subtype: "error_during_execution", IsError: true, Errors: []string{"No conversation found with session ID: 0b0e7d2c-8c2a-4f5e-9a53-1d3c2f1e4b5a"}}}},
		{"tool use and thinking", `{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"hmm"},{"type":"tool_use","id":"toolu_1","name":"mcp__tts__text_to_speech","input":{"text":"a \"b\"","speed":1}}]}}`,
			Event{Kind: KindAssistant, Type: "assistant", Blocks: []Block{{Type: "thinking"}, {Type: "tool_use", ID: "toolu_1", Name: toolspec.SpeechTool, Input: json.RawMessage(`{"text":"a \"b\"","speed":1}`)}}}},
		{"tool result list", `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":[{"type":"text","text":"{\"success\":true}"},{"type":"image","source":{}},{"type":"text","text":"more"}],"is_error":false}]}}`,
			Event{Kind: KindUser, Type: "user", Blocks: []Block{{Type: "tool_result", ToolUseID: "toolu_1", Text: "{\"success\":true}\nmore"}}}},
		{"tool result string error", `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"boom","is_error":true}]}}`,
			Event{Kind: KindUser, Type: "user", Blocks: []Block{{Type: "tool_result", ToolUseID: "t", Text: "boom", IsError: true}}}},
		{"permission denied", `{"type":"system","subtype":"permission_denied","tool_name":"mcp__image-gen__generate_image","tool_use_id":"t","message":"not allowed","session_id":"s"}`,
			Event{Kind: KindPermissionDenied, Type: "system", Subtype: "permission_denied", SessionID: "s", Denial: Denial{ToolName: toolspec.ImageTool, ToolUseID: "t", Message: "not allowed"}}},
		{"result with denials and cost", `{"type":"result","subtype":"success","is_error":false,"result":null,"total_cost_usd":0.0125,"num_turns":2,"permission_denials":[{"tool_name":"x","tool_use_id":"t","tool_input":{}}]}`,
			Event{Kind: KindResult, Type: "result", Subtype: "success", Result: &TurnResult{Subtype: "success", CostUSD: 0.0125, NumTurns: 2, Denials: []Denial{{ToolName: "x", ToolUseID: "t"}}}}},
		{"result with usage", `{"type":"result","subtype":"success","is_error":false,"result":"hi","total_cost_usd":0.01,"num_turns":1,"usage":{"input_tokens":1044,"cache_creation_input_tokens":5,"cache_read_input_tokens":900,"output_tokens":7,"output_tokens_details":{"thinking_tokens":0}}}`,
			Event{Kind: KindResult, Type: "result", Subtype: "success", Result: &TurnResult{Subtype: "success", Text: "hi", CostUSD: 0.01, NumTurns: 1, Tokens: Tokens{Input: 1044, Output: 7, CacheRead: 900, CacheWrite: 5}}}},
		{"text block start", `{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}},"session_id":"s"}`,
			Event{Kind: KindTextStart, Type: "stream_event", SessionID: "s"}},
		{"text delta", `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}}`,
			Event{Kind: KindTextDelta, Type: "stream_event", Delta: "Hel"}},
		{"tool input delta", `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}}`,
			Event{Kind: KindOther, Type: "stream_event"}},
		{"escaped text", `{"type":"assistant","message":{"content":[{"type":"text","text":"line\nnext \"q\" \\ \u00e9\ud83d\ude00 \ud800x"}]}}`,
			Event{Kind: KindAssistant, Type: "assistant", Blocks: []Block{{Type: "text", Text: "line\nnext \"q\" \\ é😀 \uFFFDx"}}}},
		{"other system", `{"type":"system","subtype":"status","status":"requesting"}`, Event{Kind: KindOther, Type: "system", Subtype: "status"}},
		{"unknown type", "  {\"type\":\"rate_limit_event\",\"rate_limit_info\":{}}\r", Event{Kind: KindOther, Type: "rate_limit_event"}},
		{"no type", `{}`, Event{Kind: KindOther}},
		{"wrong field types", `{"type":"result","subtype":7,"is_error":"yes","result":{"a":1},"total_cost_usd":"1"}`,
			Event{Kind: KindResult, Type: "result", Result: &TurnResult{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse\n got %+v %+v\nwant %+v %+v", got, got.Result, tt.want, tt.want.Result)
			}
		})
	}
}

func TestParseEventDoesNotAliasLine(t *testing.T) {
	line := []byte(`{"type":"assistant","session_id":"abc","message":{"content":[{"type":"tool_use","id":"t","name":"n","input":{"k":"v"}},{"type":"text","text":"hello"}]}}`)
	ev, err := Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	for i := range line {
		line[i] = 'X'
	}
	if ev.SessionID != "abc" || string(ev.Blocks[0].Input) != `{"k":"v"}` || ev.Blocks[1].Text != "hello" {
		t.Errorf("event changed with the line buffer: %+v", ev)
	}
}

func TestParseEventRejectsBrokenFraming(t *testing.T) {
	for _, line := range []string{
		"", "   ", "hello", "this is not JSON {", `{"type":"result"`, `{"type":"result"}}`, `{"type":"result"} {}`,
		`["type"]`, `"result"`, `42`, `{"a":01}`, `{"a":"\x"}`, "{\"a\":\"tab\there\"}", `{"a":tru}`, `{'a':1}`,
		`{"a":1,}`, `{"a" 1}`, // deeper than encoding/json's nesting limit (10000)
		`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	} {
		_, err := Parse([]byte(line))
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%.40q) = %v, want *ProtocolError", line, err)
		}
	}
}

// A line's number goes into its broken framing; a line too long is broken
// framing too; another read error is as it was.
func TestParseLine(t *testing.T) {
	if ev, err := ParseLine(1, []byte(realInit), nil); err != nil || ev.Kind != KindInit {
		t.Errorf("ParseLine(init) = %v, %v", ev.Kind, err)
	}
	var pe *ProtocolError
	if _, err := ParseLine(3, []byte("not json"), nil); !errors.As(err, &pe) || pe.Line != 3 {
		t.Errorf("err = %v, want *ProtocolError on line 3", err)
	}
	if _, err := ParseLine(2, nil, bufio.ErrTooLong); !errors.As(err, &pe) || pe.Line != 2 || !errors.Is(err, bufio.ErrTooLong) {
		t.Errorf("err = %v, want *ProtocolError on line 2", err)
	}
	if _, err := ParseLine(2, nil, io.ErrClosedPipe); err != io.ErrClosedPipe {
		t.Errorf("err = %v, want the read error", err)
	}
}

func FuzzParseEvent(f *testing.F) {
	for _, seed := range []string{realInit, realAPIErrorText, realAPIErrorResult, realUnknownResume,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}]}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"\ud83d\ude00\u00e9\n"},{"type":"tool_use","id":"1","name":"n","input":[1,2e5,-0.5]}]}}`,
		`{"type":"system","subtype":"permission_denied","tool_name":"x"}`, `{"type":"typ\u0065"}`, "{\"a\":\"\xff\"}", `[]`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := Parse(line)
		trimmed := bytes.TrimLeft(line, " \t\r\n")
		isObject := json.Valid(line) && len(trimmed) > 0 && trimmed[0] == '{'
		if (err == nil) != isObject {
			t.Fatalf("Parse error %v, but json.Valid says object=%v", err, isObject)
		}
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ProtocolError", err)
			}
			return
		}
		// What we decode agrees with encoding/json.
		var top map[string]json.RawMessage
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&top); err != nil {
			t.Fatalf("encoding/json cannot decode a line Parse accepted: %v", err)
		}
		checkString := func(field, got string) {
			var want string
			if json.Unmarshal(top[field], &want) == nil && got != want {
				t.Errorf("%s = %q, encoding/json says %q", field, got, want)
			}
		}
		checkString("type", ev.Type)
		checkString("subtype", ev.Subtype)
		checkString("session_id", ev.SessionID)
		var message map[string]json.RawMessage
		var content []json.RawMessage
		if (ev.Kind == KindAssistant || ev.Kind == KindUser) && json.Unmarshal(top["message"], &message) == nil &&
			json.Unmarshal(message["content"], &content) == nil {
			var texts []string
			for _, raw := range content {
				var block map[string]json.RawMessage
				var typ, text string
				if json.Unmarshal(raw, &block) == nil && json.Unmarshal(block["type"], &typ) == nil && typ == "text" {
					_ = json.Unmarshal(block["text"], &text) // not a string: empty
					texts = append(texts, text)
				}
			}
			var got []string
			for _, b := range ev.Blocks {
				if b.Type == "text" {
					got = append(got, b.Text)
				}
			}
			if !slices.Equal(texts, got) {
				t.Errorf("text blocks %q, encoding/json says %q", got, texts)
			}
		}
		if (ev.Kind == KindResult) != (ev.Result != nil) {
			t.Errorf("Kind %v with Result %v", ev.Kind, ev.Result)
		}
	})
}

// BenchmarkParse reads the golden transcripts of the real CLI (testdata),
// the stream the driver parses on every request. ms/request is the cost
// of one request's output, to hold against the request's ~500 ms.
func BenchmarkParse(b *testing.B) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "*.jsonl"))
	var transcript []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		transcript = append(transcript, data...)
	}
	if len(transcript) == 0 {
		b.Fatal("no ../testdata/*.jsonl transcripts")
	}
	b.SetBytes(int64(len(transcript)))
	b.ReportAllocs()
	for b.Loop() {
		sc := bufio.NewScanner(bytes.NewReader(transcript))
		sc.Buffer(nil, MaxLineSize)
		for n := 1; sc.Scan(); n++ {
			if _, err := ParseLine(n, sc.Bytes(), nil); err != nil && len(bytes.TrimSpace(sc.Bytes())) > 0 {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(files))/1e6, "ms/request")
}
