// Command brainbot runs Telegram persona bots on the Claude Code CLI.
//
//	brainbot run                 run every bot in the brains folder
//	brainbot doctor              check what run needs and print each check
//	brainbot init                set up a first bot, guided
//	brainbot chat BRAIN_FILE     talk to one brain in the terminal, without a token
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
	stopOn := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if len(os.Args) > 1 && os.Args[1] == "chat" {
		stopOn = stopOn[1:] // in a chat, Ctrl-C stops the answer being written (chat.go)
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopOn...)
	code := newMain().Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
