package main

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	mcpserver "brainbot/mcp"
	"brainbot/mcp/clock"
	"brainbot/mcp/launch"
	"brainbot/toolspec"
)

// mcp serves one of our MCP servers on stdin/stdout: tts and image-gen for
// MCP clients other than brainbot's own CLIs (`brainbot run` serves those
// tools itself, over HTTP), and clock for brains that give their bot a
// clock (brains/clock.yaml). It reads BRAINBOT_DATA, OPENAI_API_KEY and
// OPENAI_BASE_URL from its environment. Stdout carries JSON-RPC: logs go
// to stderr as JSON lines.
func (m *Main) mcp(ctx context.Context, args []string) error {
	fs := m.newFlagSet("mcp", "mcp tts|image-gen|clock\n\nServes an MCP server on stdio: tts and image-gen for other MCP clients (brainbot run serves the same tools to its bots itself), clock for brains' mcp_servers (its tool now tells the date and time).\nEnvironment: BRAINBOT_DATA, OPENAI_API_KEY, OPENAI_BASE_URL, BRAINBOT_LOG_LEVEL; TZ for clock.")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.Arg(0) == "exec" {
		return m.mcpExec(fs.Args()[1:])
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("want one server name: tts, image-gen or clock")}
	}
	var newServer func(mcpserver.Config) *server.MCPServer
	switch name := fs.Arg(0); name {
	case toolspec.SpeechServer:
		newServer = mcpserver.NewTTSServer
	case toolspec.ImageServer:
		newServer = mcpserver.NewImageServer
	case clock.Name:
		newServer = func(mcpserver.Config) *server.MCPServer { return clock.NewServer(time.Now) }
	default:
		return usageError{fmt.Errorf("unknown MCP server %q: want tts, image-gen or clock", name)}
	}

	cfg, err := envConfig(m.getenv)
	if err != nil {
		return usageError{err}
	}
	log, err := newLogger(logSettings{Level: cfg.LogLevel, Format: "json"}, m.Stderr, false, newSecretSet(m.Environ))
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }() // a failed flush of stderr has nowhere to be reported
	log = log.With(zap.String("server", fs.Arg(0)))

	s := newServer(mcpserver.Config{DataDir: cfg.DataDir, OpenAI: openAIConfig(cfg), Log: log})
	return mcpserver.Serve(ctx, s, m.Stdin, m.Stdout, log)
}

// mcpExec runs a brain's stdio MCP server with only its own environment
// and a minimal base, and ends it with its client (package launch):
// brainbot is the command the CLI and check -connect start such a server
// with.
func (m *Main) mcpExec(args []string) error {
	fs := m.newFlagSet("mcp exec", "mcp exec [-keep NAME]... -- COMMAND [ARGS...]\n\nRuns COMMAND with PATH, HOME, the locale, the time zone, TMPDIR, the proxy and certificate settings of this environment, and the variables named by -keep: nothing else. brainbot starts the MCP servers of brains so.")
	var keep []string
	fs.Func(launch.KeepFlag, "a `variable` the command keeps (repeatable)", func(name string) error {
		keep = append(keep, name)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() == 0 {
		return usageError{fmt.Errorf("want the command to run")}
	}
	return launch.Run(m.Environ, fs.Arg(0), fs.Args()[1:], keep)
}

// openAIConfig configures brainbot's OpenAI clients: the tools' and the
// transcription of voice messages in.
func openAIConfig(cfg Config) openai.ClientConfig {
	c := openai.DefaultConfig(cfg.OpenAIKey)
	if cfg.OpenAIBaseURL != "" {
		c.BaseURL = cfg.OpenAIBaseURL
	}
	return c
}
