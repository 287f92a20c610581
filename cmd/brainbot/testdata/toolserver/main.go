// Command toolserver is the MCP server of the end-to-end tests of brains
// that bring their own tools: a stdio server (mcp-go) with tools that
// answer, fail, sleep or read their environment, so a test can drive
// every path of a tool call through the real Claude Code CLI.
//
// With TOOLSERVER_STUBBORN set it is a server that outlives what it can:
// it ignores SIGINT, SIGTERM and SIGHUP, does not exit when its input
// closes, and starts a child as deaf (TOOLSERVER_CHILD).
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	if os.Getenv("TOOLSERVER_CHILD") != "" {
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		select {}
	}
	stubborn := os.Getenv("TOOLSERVER_STUBBORN") != ""
	if stubborn {
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "TOOLSERVER_CHILD=1")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	s := server.NewMCPServer("toolserver", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Answers its text back."),
		mcp.WithString("text", mcp.Required())), echo)
	s.AddTool(mcp.NewTool("fail", mcp.WithDescription("Always fails.")), fail)
	s.AddTool(mcp.NewTool("env", mcp.WithDescription("Answers the value of an environment variable."),
		mcp.WithString("name", mcp.Required())), env)
	s.AddTool(mcp.NewTool("sleep", mcp.WithDescription("Answers after some seconds."),
		mcp.WithNumber("seconds", mcp.Required())), sleep)
	s.AddTool(mcp.NewTool("hidden", mcp.WithDescription("A tool no brain allows.")), echo)
	err := server.ServeStdio(s) // returns at EOF, SIGINT or SIGTERM
	if stubborn {
		select {}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func echo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText("echo: " + req.GetString("text", "")), nil
}

func fail(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultError("the tool failed on purpose"), nil
}

func env(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := req.GetString("name", "")
	value, ok := os.LookupEnv(name)
	if !ok {
		return mcp.NewToolResultText(name + " is not set"), nil
	}
	return mcp.NewToolResultText(name + "=" + value), nil
}

func sleep(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	d := time.Duration(req.GetFloat("seconds", 1) * float64(time.Second))
	select {
	case <-time.After(d):
		return mcp.NewToolResultText(fmt.Sprintf("slept %v", d)), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
