package main

import (
	"context"
	"fmt"
	"strings"

	"brainbot/bot/brain"
	"brainbot/bot/brain/probe"
	"brainbot/claude"
	"brainbot/toolspec"
)

// connect starts b's own MCP servers as the CLI would (check -connect),
// prints each one's tools, and returns as problems a server that does not
// start and a tools.allow entry that a started server does not offer.
func (m *Main) connect(ctx context.Context, b *brain.Brain) brain.Errors {
	servers, _ := b.ResolveMCPServers(m.lookupEnv)
	found := probe.Connect(ctx, servers, claude.ServerEnv(m.Environ), m.Executable)
	var problems brain.Errors
	offered := map[string][]string{} // tools of the servers that started
	for _, s := range found {
		if s.Err != nil {
			problems = append(problems, b.Problem("mcp_servers."+s.Name, "%v", s.Err))
			continue
		}
		offered[s.Name] = s.Tools
		fmt.Fprintf(m.Stdout, "    mcp server %s: %s\n", s.Name, orNone(strings.Join(s.Tools, ", ")))
	}
	for i, entry := range b.Tools.Allow {
		server, tool, _ := toolspec.SplitToolName(entry)
		tools, started := offered[server]
		if started && !probe.Offers(found, server, tool) {
			problems = append(problems, b.Problem(fmt.Sprintf("tools.allow[%d]", i),
				"server %s offers no tool %s; it offers %s", server, orNone(tool), orNone(strings.Join(tools, ", "))))
		}
	}
	return problems
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
