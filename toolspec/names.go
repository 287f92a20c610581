package toolspec

import "strings"

// toolPrefix starts the name of every MCP tool as Claude Code names it.
const toolPrefix = "mcp__"

// OurServer reports whether server is the name of one of brainbot's own
// MCP servers, which no brain's server may take.
func OurServer(server string) bool {
	return server == SpeechServer || server == ImageServer || server == QuestionServer || server == MemoryServer
}

// SplitToolName splits a name as Claude Code writes it, mcp__<server> (a
// whole server) or mcp__<server>__<tool>. ok is false for anything else,
// such as a built-in tool ("Bash"). Server names hold no "__", so the
// first one after the prefix ends the server.
func SplitToolName(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, toolPrefix)
	if !found || rest == "" {
		return "", "", false
	}
	server, tool, _ = strings.Cut(rest, "__")
	if server == "" {
		return "", "", false
	}
	return server, tool, true
}
