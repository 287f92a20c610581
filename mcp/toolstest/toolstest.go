// Package toolstest runs brainbot's real MCP tool server (package mcp, over
// HTTP on loopback) in front of the OpenAI stand-in, for tests that drive
// a Claude CLI, fake or real, through claude.Driver: the driver needs the
// server's URL and its tickets.
package toolstest

import (
	"context"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"brainbot/mcp"
	"brainbot/mcp/openaitest"
	"brainbot/ticket"
)

// Tools is a running tool server.
type Tools struct {
	// URL and Tickets go into claude.Config (ToolsURL, Tickets).
	URL     string
	Tickets *ticket.Registry
	// OpenAI is the stand-in the tools call.
	OpenAI *openaitest.Server
}

// Start serves the tools, writing into dataDir/audio-output and
// image-output, until the test ends.
func Start(tb testing.TB, dataDir string, log *zap.Logger) *Tools {
	tb.Helper()
	oa := openaitest.NewServer()
	tb.Cleanup(oa.Close)
	cfg := openai.DefaultConfig("sk-toolstest-key")
	cfg.BaseURL = oa.URL
	tickets := ticket.NewRegistry()
	srv, err := mcp.ListenHTTP(mcp.Config{DataDir: dataDir, OpenAI: cfg, Log: log}, tickets, "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx) // the test is over: a call still in flight is of no interest
	})
	return &Tools{URL: srv.URL, Tickets: tickets, OpenAI: oa}
}
