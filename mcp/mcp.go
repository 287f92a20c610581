// Package mcp holds brainbot's two stdio MCP servers: "tts" with the tool
// text_to_speech (Claude sees mcp__tts__text_to_speech) and "image-gen" with
// generate_image (mcp__image-gen__generate_image). Both call OpenAI, write
// their file atomically into BRAINBOT_DATA/<kind>-output/ through package
// output (which sanitises the model-chosen file name), and answer JSON text
// with the file's path. A third tool, the "brainbot" server's ask_question
// (a question with options the bot shows as buttons), is served only to
// the bots' own CLIs, over HTTP (http.go, question.go).
//
// brainbot speaks its own way too (Speaker): an answer while the model still
// writes it (Utterance: parts of whole sentences spoken as they complete,
// joined when the text is done; the tool call of turn two only collects
// them), a panel member's words, an answer read aloud.
//
// A failing OpenAI call is a tool error result with a short reason ("openai:
// 429 rate limited: ..."), never a Go error: the server keeps serving. Each
// OpenAI call has its own deadline. Stdout carries JSON-RPC, so everything is
// logged through zap (pointed at stderr by the caller); keys never are.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"
)

// DefaultTimeout bounds one OpenAI call (and one image download).
const DefaultTimeout = 60 * time.Second

// Config is what both servers need.
type Config struct {
	// DataDir is the BRAINBOT_DATA root; files go to its audio-output and
	// image-output folders.
	DataDir string
	// OpenAI configures the API client (key, BaseURL, HTTPClient).
	OpenAI openai.ClientConfig
	// HTTPClient downloads images answered as URLs (http.DefaultClient
	// when nil); the per-call Timeout applies to it through the context.
	HTTPClient *http.Client
	// Timeout bounds each OpenAI call; DefaultTimeout when zero.
	Timeout time.Duration
	// Log receives the servers' logs; zap.NewNop() when nil.
	Log *zap.Logger
	// Now gives the time stamped into file names; time.Now when nil.
	Now func() time.Time
	// MaxVoiceNote is the most one speech file may hold; longer speech is
	// saved as several (toolspec.MaxVoiceNoteBytes when 0; tests lower it).
	MaxVoiceNote int
}

func (c Config) withDefaults() Config {
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Version is reported to MCP clients.
const Version = "1.0.0"

func newServer(name string, tools ...server.ServerTool) *server.MCPServer {
	s := server.NewMCPServer(name, Version, server.WithToolCapabilities(false), server.WithRecovery())
	s.AddTools(tools...)
	return s
}

// Serve runs s over stdio-style streams until in ends or ctx is cancelled
// (both a normal end: nil). mcp-go's own error log goes to log at Warn.
func Serve(ctx context.Context, s *server.MCPServer, in io.Reader, out io.Writer, log *zap.Logger) error {
	if log == nil {
		log = zap.NewNop()
	}
	stdio := server.NewStdioServer(s)
	errLog, err := zap.NewStdLogAt(log.Named("mcp-go"), zap.WarnLevel)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	stdio.SetErrorLogger(errLog)
	err = stdio.Listen(ctx, in, out)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcp: serve: %w", err)
	}
	return nil
}

// jsonResult answers v as the tool's JSON text.
func jsonResult(v any) *mcpgo.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil { // only plain structs of strings and numbers come here
		return mcpgo.NewToolResultError("internal: " + err.Error())
	}
	return mcpgo.NewToolResultText(string(b))
}

// maxReason bounds the OpenAI message quoted in a tool error.
const maxReason = 200

// openAIFailure turns a failed OpenAI call into the short reason the tool
// answers: status, what it means, and OpenAI's message. The message of a 401
// is left out: it quotes (part of) the key.
func openAIFailure(err error, timeout time.Duration) string {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("openai: timed out after %v", timeout)
	case errors.Is(err, context.Canceled):
		return "openai: canceled"
	case errors.As(err, &apiErr):
		code, _ := apiErr.Code.(string)
		reason := statusReason(apiErr.HTTPStatusCode, code)
		if apiErr.HTTPStatusCode == http.StatusUnauthorized {
			return fmt.Sprintf("openai: %d %s", apiErr.HTTPStatusCode, reason)
		}
		return fmt.Sprintf("openai: %d %s: %s", apiErr.HTTPStatusCode, reason, truncate(apiErr.Message, maxReason))
	case errors.As(err, &reqErr):
		return fmt.Sprintf("openai: %d %s", reqErr.HTTPStatusCode, statusReason(reqErr.HTTPStatusCode, ""))
	}
	return "openai: " + truncate(err.Error(), maxReason)
}

func statusReason(status int, code string) string {
	switch {
	case code == "content_policy_violation":
		return "content policy violation"
	case status == http.StatusUnauthorized:
		return "unauthorized (check OPENAI_API_KEY)"
	case status == http.StatusTooManyRequests:
		return "rate limited"
	case status >= 500:
		return "server error"
	}
	return strings.ToLower(http.StatusText(status))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
