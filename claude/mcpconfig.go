package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"brainbot/mcp/launch"
	"brainbot/toolspec"
)

// MCPServer is an entry of a --mcp-config file: a program the CLI starts
// on stdio (Type "stdio", Command, Args, Env) or a server over streamable
// HTTP (Type "http", URL, Headers; the CLI sends the headers with every
// request).
type MCPServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// mcpEntry is an MCPServer with the CLI's per-server tool call timeout
// in milliseconds (checked on CLI 2.1.328: a call that takes longer ends
// with the error result "MCP server "<name>" tool "<tool>" timed out after
// <n>s"; values under 1000 are ignored).
type mcpEntry struct {
	MCPServer
	TimeoutMS int64 `json:"timeout,omitempty"`
}

// writeMCPConfig writes the --mcp-config of one CLI process: our servers
// (the question tool's only when the request allows questions, the
// memory tools' when it offers them) with the
// process's bearer token, and the request's own servers
// with its tool timeout, each stdio one started through the launcher. The
// token and the servers' secrets make the file private (mode 0600,
// removed when the process ends) rather than a command-line argument,
// which every local user can read in /proc.
func (d *Driver) writeMCPConfig(token string, req Request) (path string, err error) {
	servers := map[string]mcpEntry{}
	for name, s := range req.MCPServers {
		if s.Type == "" || s.Type == "stdio" {
			if d.cfg.Launcher == "" {
				return "", fmt.Errorf("claude: the request's MCP server %q needs Config.Launcher to start", name)
			}
			s.Command, s.Args = d.cfg.Launcher, launch.Args(s.Command, s.Args, s.Env)
		}
		servers[name] = mcpEntry{MCPServer: s, TimeoutMS: req.ToolTimeout.Milliseconds()}
	}
	ours := []string{toolspec.SpeechServer, toolspec.ImageServer}
	if req.Questions {
		ours = append(ours, toolspec.QuestionServer)
	}
	if req.Memory {
		ours = append(ours, toolspec.MemoryServer)
	}
	for _, name := range ours {
		servers[name] = mcpEntry{MCPServer: MCPServer{Type: "http", URL: d.cfg.ToolsURL + toolspec.ServerPath(name),
			Headers: map[string]string{"Authorization": "Bearer " + token}}}
	}
	data, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		return "", fmt.Errorf("claude: MCP config: %w", err)
	}
	f, err := os.CreateTemp(d.mcpDir, "cli-*.json") // created 0600
	if err != nil {
		return "", fmt.Errorf("claude: MCP config: %w", err)
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("claude: MCP config: %w", err)
	}
	return f.Name(), nil
}
