package claude

import (
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"brainbot/claude/streamjson"
	"brainbot/toolspec"
)

// maxToolError bounds the error text a tool call's log line quotes.
const maxToolError = 300

// toolLog follows the model's tool calls through the CLI's stream: a
// tool_use block starts a call, the tool_result with its id ends it (a
// system/permission_denied line before it says the CLI refused it). Each
// call is logged and kept for Result.ToolCalls when it ends.
type toolLog struct {
	log     *zap.Logger
	pending map[string]pendingCall // by tool_use id
	denied  map[string]bool        // tool_use ids the CLI refused
	done    []ToolCall
	seq     int             // orders the pending calls
	warned  map[string]bool // servers whose failure was logged
}

type pendingCall struct {
	call  ToolCall
	since time.Time
	order int
}

func newToolLog(log *zap.Logger) *toolLog {
	return &toolLog{log: log, pending: map[string]pendingCall{}, denied: map[string]bool{}, warned: map[string]bool{}}
}

// servers logs, once per request, each MCP server the CLI reports not
// connected: the model does not have its tools.
func (t *toolLog) servers(statuses []streamjson.ServerStatus) {
	for _, s := range statuses {
		if s.Status != "connected" && !t.warned[s.Name] {
			t.warned[s.Name] = true
			t.log.Warn("MCP server not connected: the model cannot use its tools", zap.String("server", s.Name), zap.String("status", s.Status))
		}
	}
}

// called notes a tool_use block of the model, written after text.
func (t *toolLog) called(b streamjson.Block, text string) {
	server, tool, ok := toolspec.SplitToolName(b.Name)
	if !ok {
		server, tool = "", b.Name
	}
	t.seq++
	t.pending[b.ID] = pendingCall{call: ToolCall{Server: server, Tool: tool, Input: b.Input, TextBefore: text}, since: time.Now(), order: t.seq}
}

// refused notes a call the CLI denied.
func (t *toolLog) refused(d streamjson.Denial) { t.denied[d.ToolUseID] = true }

// answered ends the call a tool_result block answers.
func (t *toolLog) answered(b streamjson.Block) {
	p, ok := t.pending[b.ToolUseID]
	if !ok {
		return
	}
	delete(t.pending, b.ToolUseID)
	c := p.call
	c.Duration = time.Since(p.since)
	switch {
	case t.denied[b.ToolUseID]:
		c.Outcome, c.Error = ToolDenied, b.Text
	case b.IsError:
		c.Outcome, c.Error = ToolError, b.Text
	default:
		c.Outcome = ToolOK
	}
	t.end(c)
}

// close ends the calls left without a result (the request ended first)
// and returns every call.
func (t *toolLog) close() []ToolCall {
	left := slices.SortedFunc(maps.Values(t.pending), func(a, b pendingCall) int { return a.order - b.order })
	for _, p := range left {
		c := p.call
		c.Duration, c.Outcome, c.Error = time.Since(p.since), ToolError, "no result: the request ended first"
		t.end(c)
	}
	t.pending = map[string]pendingCall{}
	return t.done
}

// end logs a finished call and keeps it. Its arguments may hold what the
// user wrote, so they get a line of their own at debug level.
func (t *toolLog) end(c ToolCall) {
	t.done = append(t.done, c)
	fields := []zap.Field{zap.String("server", c.Server), zap.String("tool", c.Tool),
		zap.Int64("duration_ms", c.Duration.Milliseconds()), zap.String("outcome", c.Outcome)}
	if c.Error != "" {
		fields = append(fields, zap.String("error", truncate(c.Error, maxToolError)))
	}
	t.log.Info("tool call", fields...)
	if ce := t.log.Check(zap.DebugLevel, "tool call arguments"); ce != nil {
		ce.Write(zap.String("server", c.Server), zap.String("tool", c.Tool), zap.Reflect("arguments", c.Input))
	}
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
