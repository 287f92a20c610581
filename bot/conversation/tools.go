package conversation

// The brain's own tools and the system prompt's variables on their way to
// the Claude driver, and the tool calls the driver reports on their way to
// the metrics.

import (
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/toolspec"
)

// brainTools sets the request's own MCP servers, allowed tools and tool
// timeout from the brain. The servers' ${VAR} references are resolved here,
// each value handed to onSecret first so the logs mask it; an unset
// variable is logged (the server gets it empty).
func (p *Pipeline) brainTools(b *brain.Brain, bot string, log *zap.Logger, req *claude.Request) {
	if len(b.MCPServers) == 0 {
		return
	}
	lookup := func(name string) (string, bool) {
		v, ok := p.cfg.LookupEnv(name)
		if ok && p.cfg.OnSecret != nil {
			p.cfg.OnSecret(v)
		}
		return v, ok
	}
	servers, unset := b.ResolveMCPServers(lookup)
	if p.unset.changed(bot, unset) {
		log.Warn("variables of the brain's MCP servers are not set; the servers get them empty", zap.Strings("variables", unset))
	}
	req.MCPServers = make(map[string]claude.MCPServer, len(servers))
	for name, s := range servers {
		req.MCPServers[name] = claude.MCPServer{Type: s.Type, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
	}
	req.AllowedTools = slices.Clone(b.Tools.Allow)
	req.ToolTimeout = b.Tools.Timeout.D()
}

// unsetWarnings remembers, per bot, which unset variables its admin was
// told of, so that the warning comes once, not with every message, and
// again when the set changes.
type unsetWarnings struct {
	mu     sync.Mutex
	warned map[string]string // bot → its unset variables, joined
}

// changed records bot's unset variables and reports whether there are
// some the admin has not heard of.
func (w *unsetWarnings) changed(bot string, unset []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := strings.Join(unset, ",")
	if w.warned[bot] == key {
		return false
	}
	if w.warned == nil {
		w.warned = map[string]string{}
	}
	w.warned[bot] = key
	return key != ""
}

// countToolCalls adds the request's tool calls to the metrics. Servers
// and tools are labels only when they are the brain's or ours; a name the
// model made up counts as "other", so it cannot grow the metrics.
func (r *request) countToolCalls(res *claude.Result) {
	if res == nil {
		return
	}
	for _, c := range res.ToolCalls {
		server, tool := "other", "other"
		if known(r.brain, c.Server) {
			server, tool = c.Server, c.Tool
		}
		r.p.cfg.Metrics.ToolCalls.WithLabelValues(r.in.Key.Bot, server, tool, c.Outcome).Observe(c.Duration.Seconds())
	}
}

// known reports whether server is one of ours or the brain's.
func known(b *brain.Brain, server string) bool {
	_, mine := b.MCPServers[server]
	return mine || toolspec.OurServer(server)
}

// fileCallArgs are the arguments of the request's successful call of the
// tool that made its file (the model's text to speak, or its picture's
// prompt), nil when there is none.
func fileCallArgs(res *claude.Result, tool string) []byte {
	c, _ := lastCall(res, tool)
	return c.Input
}

// lastCall is the last call of our tool that succeeded in res.
func lastCall(res *claude.Result, tool string) (claude.ToolCall, bool) {
	server, name, _ := toolspec.SplitToolName(tool)
	for _, c := range slices.Backward(res.ToolCalls) {
		if c.Outcome == claude.ToolOK && c.Server == server && c.Tool == name {
			return c, true
		}
	}
	return claude.ToolCall{}, false
}
