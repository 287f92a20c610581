package main

import (
	"context"
	"path/filepath"

	"brainbot/state/sqlite"
)

// heldBrains reports which brains have a Telegram bot as the service's
// database remembers it, for check and the preflight to keep a token with
// the brain that has it, as run does (bot/holders.go). It reads without
// changing anything; where there is nothing to read (a fresh install, a
// database of an earlier release) or the memory is in a cluster's NATS,
// it holds none, and the first brain file by name keeps a token.
func heldBrains(ctx context.Context, cfg Config) func(id string) bool {
	if cfg.NATSURL != "" {
		return nil
	}
	db, err := sqlite.OpenExisting(ctx, filepath.Join(cfg.DataDir, sqlite.FileName))
	if err != nil {
		return nil
	}
	defer db.Close()
	byNumber, err := db.TelegramBotHolders(ctx)
	if err != nil {
		return nil
	}
	held := map[string]bool{}
	for _, id := range byNumber {
		held[id] = true
	}
	return func(id string) bool { return held[id] }
}
