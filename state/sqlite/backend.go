package sqlite

import (
	"context"

	"brainbot/bot/message"
)

// Append stores env in the journal, and poller's offset with it (in one
// transaction), and hands it to the consumer.
func (s *Store) Append(ctx context.Context, poller string, env message.Envelope) error {
	return s.journal.Append(ctx, poller, env)
}

// Consume hands handle what an earlier process left unanswered, in the
// order it came, then every entry appended from now on.
func (s *Store) Consume(ctx context.Context, handle func(message.Delivery)) {
	s.journal.Consume(ctx, handle)
}

// Lease runs poll at once: one process polls every bot it runs.
func (s *Store) Lease(ctx context.Context, bot string, poll func(ctx context.Context) error) error {
	return poll(ctx)
}

// Restore does nothing: the CLI keeps its transcripts on this machine,
// where the next answer of their conversation finds them.
func (s *Store) Restore(ctx context.Context, bot, session string, release func()) error { return nil }

// Save does nothing: the transcript stays where the CLI wrote it.
func (s *Store) Save(ctx context.Context, bot, session string) error { return nil }

// Forget does nothing: a turn not stored is the local copy's, which only
// the CLI reads.
func (s *Store) Forget(bot, session string) {}
