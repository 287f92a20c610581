package claude

import (
	"errors"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/claude/streamjson"
	"brainbot/toolspec"
)

// observed is a logger whose lines a test reads.
func observed(level zapcore.Level) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(level)
	return zap.New(core), logs
}

// Every call the CLI reports ends as one ToolCall and one "tool call"
// line: ok, error or denied, calls left without a result too.
func TestToolLog(t *testing.T) {
	log, logs := observed(zap.InfoLevel)
	tl := newToolLog(log)
	tl.called(streamjson.Block{Type: "tool_use", ID: "a", Name: "mcp__clock__now", Input: []byte(`{"zone":"UTC"}`)}, "")
	tl.called(streamjson.Block{Type: "tool_use", ID: "b", Name: "mcp__clock__fail"}, "")
	tl.called(streamjson.Block{Type: "tool_use", ID: "c", Name: "mcp__clock__secret"}, "")
	tl.called(streamjson.Block{Type: "tool_use", ID: "d", Name: "Bash"}, "")
	tl.called(streamjson.Block{Type: "tool_use", ID: "e", Name: "mcp__clock__slow"}, "")
	tl.answered(streamjson.Block{Type: "tool_result", ToolUseID: "b", Text: "it broke", IsError: true})
	tl.refused(streamjson.Denial{ToolName: "mcp__clock__secret", ToolUseID: "c"})
	tl.answered(streamjson.Block{Type: "tool_result", ToolUseID: "c", Text: "Permission denied", IsError: true})
	tl.answered(streamjson.Block{Type: "tool_result", ToolUseID: "a", Text: "12:00"})
	tl.answered(streamjson.Block{Type: "tool_result", ToolUseID: "zzz"}) // not a call it saw: ignored
	calls := tl.close()

	type brief struct{ server, tool, outcome, err string }
	var got []brief
	for _, c := range calls {
		got = append(got, brief{c.Server, c.Tool, c.Outcome, c.Error})
	}
	want := []brief{
		{"clock", "fail", ToolError, "it broke"},
		{"clock", "secret", ToolDenied, "Permission denied"},
		{"clock", "now", ToolOK, ""},
		{"", "Bash", ToolError, "no result: the request ended first"},
		{"clock", "slow", ToolError, "no result: the request ended first"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls\n got %v\nwant %v", got, want)
	}
	if string(calls[2].Input) != `{"zone":"UTC"}` {
		t.Errorf("input %s", calls[2].Input)
	}
	lines := logs.FilterMessage("tool call").All()
	if len(lines) != len(want) {
		t.Fatalf("%d tool call lines, want %d", len(lines), len(want))
	}
	for i, l := range lines {
		f := l.ContextMap()
		if f["server"] != want[i].server || f["tool"] != want[i].tool || f["outcome"] != want[i].outcome {
			t.Errorf("line %d: %v", i, f)
		}
		if _, ok := f["duration_ms"]; !ok {
			t.Errorf("line %d has no duration_ms: %v", i, f)
		}
		// The arguments may hold what the user wrote: debug only.
		if _, ok := f["arguments"]; ok {
			t.Errorf("line %d logs the arguments at info level: %v", i, f)
		}
	}
}

func TestToolLogArgumentsAtDebug(t *testing.T) {
	log, logs := observed(zap.DebugLevel)
	tl := newToolLog(log)
	tl.called(streamjson.Block{Type: "tool_use", ID: "a", Name: "mcp__clock__now", Input: []byte(`{"zone":"UTC"}`)}, "")
	tl.answered(streamjson.Block{Type: "tool_result", ToolUseID: "a", Text: "12:00"})
	if info := logs.FilterMessage("tool call").All(); len(info) != 1 || info[0].ContextMap()["arguments"] != nil {
		t.Errorf("info lines %v: want one, without the arguments", info)
	}
	debug := logs.FilterMessage("tool call arguments").All()
	if len(debug) != 1 || debug[0].Level != zap.DebugLevel || debug[0].ContextMap()["arguments"] == nil || debug[0].ContextMap()["tool"] != "now" {
		t.Errorf("debug lines %v: want one with the arguments", debug)
	}
}

// A server the CLI could not connect is a warning, once per request.
func TestToolLogServers(t *testing.T) {
	log, logs := observed(zap.InfoLevel)
	tl := newToolLog(log)
	for range 2 { // init comes at every turn
		tl.servers([]streamjson.ServerStatus{{Name: "tts", Status: "connected"}, {Name: "clock", Status: "failed"}})
	}
	warns := logs.FilterMessage("MCP server not connected: the model cannot use its tools").All()
	if len(warns) != 1 || warns[0].ContextMap()["server"] != "clock" || warns[0].ContextMap()["status"] != "failed" {
		t.Errorf("warnings %v: want one for clock", warns)
	}
}

// Through the driver: turn 1's own calls of our tools (refused by the
// tool server), turn 2's call, and a denied call all reach
// Result.ToolCalls.
func TestRunReportsToolCalls(t *testing.T) {
	e := newFakeEnv(t)
	res := e.mustRun(t, e.request(Speech, "#calltool hi"))
	var outcomes []string
	for _, c := range res.ToolCalls {
		outcomes = append(outcomes, c.Server+"/"+c.Tool+"="+c.Outcome)
	}
	want := []string{
		toolspec.SpeechServer + "/" + toolspec.SpeechToolName + "=error",
		toolspec.ImageServer + "/" + toolspec.ImageToolName + "=error",
		toolspec.SpeechServer + "/" + toolspec.SpeechToolName + "=ok",
	}
	if !slices.Equal(outcomes, want) {
		t.Errorf("tool calls %q, want %q", outcomes, want)
	}

	res, err := e.run(t, e.request(Image, "#denied draw"))
	if !errors.Is(err, errToolDenied) || res == nil || len(res.ToolCalls) != 1 || res.ToolCalls[0].Outcome != ToolDenied {
		t.Errorf("denied call: err %v, result %+v", err, res)
	}
}
