package jetstream

import (
	"context"
	"errors"

	"brainbot/state"
)

// Conversations lists the conversations kept.
func (b *Backend) Conversations(ctx context.Context, f state.ConversationFilter) ([]state.Conversation, error) {
	return nil, errors.New("jetstream: conversations: not built yet")
}

// ForgetUser deletes what the cluster keeps of user's with bot.
func (b *Backend) ForgetUser(ctx context.Context, bot string, user int64) (state.Forgotten, error) {
	return state.Forgotten{}, errors.New("jetstream: forget: not built yet")
}

// WatchForgets calls fn with every ForgetUser done through another instance.
func (b *Backend) WatchForgets(ctx context.Context, fn func(state.Forgotten)) {}
