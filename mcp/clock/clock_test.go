package clock

import (
	"context"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestNow(t *testing.T) {
	at := time.Date(2026, 11, 23, 13, 5, 9, 0, time.UTC)
	c, err := client.NewInProcessClient(NewServer(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "now" {
		t.Fatalf("tools %+v, %v; want now", tools, err)
	}
	call := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "now", args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := call(map[string]any{"timezone": "Europe/Berlin"})
	if got := res.Content[0].(mcp.TextContent).Text; res.IsError || got != "Monday 2026-11-23 14:05:09 CET (UTC+01:00, Europe/Berlin)" {
		t.Errorf("now in Berlin = %q (error %v)", got, res.IsError)
	}
	if res := call(map[string]any{"timezone": "Mars/Olympus"}); !res.IsError {
		t.Error("an unknown zone is not an error")
	}
}
