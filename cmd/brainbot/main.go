// Command brainbot runs Telegram persona bots on the Claude Code CLI.
//
//	brainbot run                 run every bot in the brains folder
//	brainbot doctor              check what run needs and print each check
//	brainbot check [DIR]         validate brain files (file:line per problem)
//	brainbot mcp tts|image-gen|clock   stdio MCP servers: our tools, a clock for brains
//	brainbot version             print brainbot's and the Claude CLI's versions
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // brains name time zones; a minimal system may have no zoneinfo
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newMain().Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
