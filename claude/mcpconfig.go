package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"brainbot/toolspec"
)

// mcpServer is one entry of a --mcp-config file: an MCP server over
// streamable HTTP. Claude Code sends the headers with every request.
type mcpServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// writeMCPConfig writes the --mcp-config of one CLI process: our two
// servers with the process's bearer token. The token makes the file
// private (mode 0600, removed when the process ends) rather than a
// command-line argument, which every local user can read in /proc.
func (d *Driver) writeMCPConfig(token string) (path string, err error) {
	servers := map[string]mcpServer{}
	for _, name := range []string{toolspec.SpeechServer, toolspec.ImageServer} {
		servers[name] = mcpServer{Type: "http", URL: d.cfg.ToolsURL + toolspec.ServerPath(name),
			Headers: map[string]string{"Authorization": "Bearer " + token}}
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
