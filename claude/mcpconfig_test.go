package claude

import (
	"testing"
	"time"

	"brainbot/sysprompt"
)

// A warm process keeps the prompt variables it started with: new values
// (the next minute, another member of a group) do not replace it. A change
// of the brain's servers or tool timeout does, since they are in the
// process's MCP config.
func TestWarmProcessAndBrainTools(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4})
	req := e.request(Text, "hello")
	req.Conversation = "bot/7"
	req.SystemPrompt = "It is {{time}}."
	req.PromptVars = sysprompt.Vars{sysprompt.Time: "10:00 UTC"}
	req.MCPServers = map[string]MCPServer{"clock": {Type: "stdio", Command: "/bin/true"}}
	req.AllowedTools = []string{"mcp__clock"}
	req.ToolTimeout = 20 * time.Second
	res := e.mustRun(t, req)

	later := follow(req, res, "a minute later")
	later.PromptVars = sysprompt.Vars{sysprompt.Time: "10:01 UTC"}
	if res = e.mustRun(t, later); !res.Warm {
		t.Error("new prompt values replaced the warm process")
	}

	for name, edit := range map[string]func(*Request){
		"servers":       func(r *Request) { r.MCPServers = map[string]MCPServer{"clock": {Type: "stdio", Command: "/bin/clock"}} },
		"tool timeout":  func(r *Request) { r.ToolTimeout = 25 * time.Second },
		"allowed tools": func(r *Request) { r.AllowedTools = []string{"mcp__clock__now"} },
	} {
		edited := follow(later, res, "after editing the "+name)
		edit(&edited)
		if res = e.mustRun(t, edited); res.Warm {
			t.Errorf("after editing the %s the warm process served the request", name)
		}
		later = edited
	}
}
