package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/mark3labs/mcp-go/server"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	mcpserver "brainbot/mcp"
	"brainbot/toolspec"
)

// mcp serves one of our MCP servers on stdin/stdout, for MCP clients other
// than brainbot's own CLIs (`brainbot run` serves the tools itself, over
// HTTP). It reads BRAINBOT_DATA, OPENAI_API_KEY and OPENAI_BASE_URL from
// its environment. Stdout carries JSON-RPC: logs go to stderr as JSON
// lines.
func (m *Main) mcp(ctx context.Context, args []string) error {
	fs := m.newFlagSet("mcp", "mcp tts|image-gen\n\nServes an MCP server on stdio, for other MCP clients (brainbot run serves the same tools to its bots itself).\nEnvironment: BRAINBOT_DATA, OPENAI_API_KEY, OPENAI_BASE_URL, BRAINBOT_LOG_LEVEL.")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("want one server name: tts or image-gen")}
	}
	var newServer func(mcpserver.Config) *server.MCPServer
	switch name := fs.Arg(0); name {
	case toolspec.SpeechServer:
		newServer = mcpserver.NewTTSServer
	case toolspec.ImageServer:
		newServer = mcpserver.NewImageServer
	default:
		return usageError{fmt.Errorf("unknown MCP server %q: want tts or image-gen", name)}
	}

	level := m.getenv("BRAINBOT_LOG_LEVEL")
	if level == "" {
		level = "info"
	}
	log, err := newLogger(logSettings{Level: level, Format: "json"}, m.Stderr, false, newSecretSet(m.Environ))
	if err != nil {
		return usageError{fmt.Errorf("BRAINBOT_LOG_LEVEL %q: %w", level, err)}
	}
	defer func() { _ = log.Sync() }() // a failed flush of stderr has nowhere to be reported
	log = log.With(zap.String("server", fs.Arg(0)))

	dataDir := m.getenv("BRAINBOT_DATA")
	if dataDir == "" {
		dataDir = lookupSetting("BRAINBOT_DATA").def
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return fmt.Errorf("BRAINBOT_DATA: %w", err)
	}
	s := newServer(mcpserver.Config{DataDir: dataDir, OpenAI: m.openAIConfig(m.getenv("OPENAI_BASE_URL")), Log: log})
	return mcpserver.Serve(ctx, s, m.Stdin, m.Stdout, log)
}

// openAIConfig configures the tools' OpenAI client: the key only from the
// environment (a flag would show in ps), the base URL when one is given.
func (m *Main) openAIConfig(baseURL string) openai.ClientConfig {
	c := openai.DefaultConfig(m.getenv("OPENAI_API_KEY"))
	if baseURL != "" {
		c.BaseURL = baseURL
	}
	return c
}
