package bot

import (
	"context"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/conversation"
	"brainbot/bot/panel/host"
	"brainbot/message"
)

// Speaker speaks text with a brain's voice settings (*mcp.Speaker): for
// the panels and for the conversations alike.
type Speaker interface {
	host.Speaker
	conversation.Speaker
}

// panelsPort and queuesPort are the pipeline's ports to the panels and
// to the intake's queues. Both are made after the pipeline (the panels
// stand on it, the intake hands it messages), so the pipeline reaches
// them through the manager, as chats reaches the transport: every port
// it has is there from New on.
type panelsPort struct{ m *Manager }

func (p panelsPort) Start(ctx context.Context, in *message.Inbound, b *brain.Brain, log *zap.Logger) (outcome, reply string, err error) {
	return p.m.panels.Start(ctx, in, b, log)
}

func (p panelsPort) OnPanel(bot string) bool { return p.m.panels.OnPanel(bot) }

type queuesPort struct{ m *Manager }

func (q queuesPort) DropWaiting(bot string, user int64) int { return q.m.intake.DropWaiting(bot, user) }
