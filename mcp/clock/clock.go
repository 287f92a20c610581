// Package clock is a small MCP server with one tool, now: the current
// date and time, in a time zone the model names or else the server's own
// (its TZ). brainbot serves it on stdio as `brainbot mcp clock`, so a
// brain can give its bot a clock with nothing else to install; the example
// brain brains/clock.yaml does.
package clock

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Name is the server's name, as it introduces itself to clients.
const Name = "clock"

// NewServer returns the clock server; now is its clock (time.Now).
func NewServer(now func() time.Time) *server.MCPServer {
	s := server.NewMCPServer(Name, "1.0.0", server.WithToolCapabilities(false), server.WithRecovery())
	s.AddTool(mcp.NewTool("now",
		mcp.WithDescription("The current date, weekday and time. Without a timezone, in the server's own."),
		mcp.WithString("timezone", mcp.Description("An IANA time zone such as Europe/Berlin or America/New_York.")),
		mcp.WithReadOnlyHintAnnotation(true),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		loc := time.Local
		if name := req.GetString("timezone", ""); name != "" {
			l, err := time.LoadLocation(name)
			if err != nil || name == "Local" {
				return mcp.NewToolResultError(fmt.Sprintf("unknown time zone %q: use an IANA name such as Europe/Berlin", name)), nil
			}
			loc = l
		}
		return mcp.NewToolResultText(describe(now().In(loc))), nil
	})
	return s
}

// describe says what time t is, for a model to read: "Monday 2026-11-23
// 14:05:09 CET (UTC+01:00, Europe/Berlin)".
func describe(t time.Time) string {
	return fmt.Sprintf("%s %s (UTC%s, %s)", t.Weekday(), t.Format("2006-01-02 15:04:05 MST"), t.Format("-07:00"), t.Location())
}
