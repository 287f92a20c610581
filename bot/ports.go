package bot

import (
	"context"
	"time"

	"brainbot/bot/conversation"
	"brainbot/bot/message"
	"brainbot/bot/panel/host"
	"brainbot/bot/store"
)

// Store is the state the bots keep between messages: *store.Store (SQLite,
// one process) or the cluster's shared state. The conversations keep
// theirs in it, the panels their runs.
type Store interface {
	conversation.State
	host.Runs
	TelegramBots
}

// TelegramBots remembers which brain has each Telegram bot, by the number
// its token starts with, so that after a restart a token stays with the
// brain that had it (holders.go).
type TelegramBots interface {
	HoldTelegramBot(ctx context.Context, number, brain string, now time.Time) error
	TelegramBotHolders(ctx context.Context) (map[string]string, error)
}

// Speaker speaks text with a brain's voice settings (*mcp.Speaker): for
// the panels and for the conversations alike.
type Speaker interface {
	host.Speaker
	conversation.Speaker
}

// Pruner is a Store that drops what its retention no longer keeps
// (*store.Store; the cluster's buckets expire by themselves).
type Pruner interface {
	Prune(ctx context.Context, now time.Time, r store.Retention) (store.Pruned, error)
}

// Log keeps the bots' updates until they are answered: the embedded
// journal, or the cluster's stream.
type Log interface {
	// Append stores env durably, and poller's offset with it: polling
	// confirms an update to Telegram only once it is stored.
	Append(ctx context.Context, poller string, env message.Envelope) error
	// Offset is the last update id poller stored (0 if none).
	Offset(ctx context.Context, poller string) (int64, error)
	// Consume hands every update stored to handle, in order per
	// conversation, until ctx ends: first what an earlier process left.
	// handle never blocks.
	Consume(ctx context.Context, handle func(message.Delivery))
}

// Cluster shares the bots with other instances (package cluster).
type Cluster interface {
	Log
	// Lease runs poll while this instance is the one polling bot, until
	// ctx ends; poll's context ends when the lease is lost.
	Lease(ctx context.Context, bot string, poll func(ctx context.Context))
}
