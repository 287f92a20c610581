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
