package sqlite

import (
	"context"

	"brainbot/state"
)

// Leases are the pollers' leases of a backend of one process: it holds
// them all (state.Leases).
type Leases struct{}

var _ state.Leases = Leases{}

// Lease runs poll at once: one process polls every bot it runs.
func (Leases) Lease(ctx context.Context, bot string, poll func(ctx context.Context) error) error {
	return poll(ctx)
}

// Transcripts are the CLI's transcripts, which stay where it writes them,
// on this machine, where the next answer of their conversation finds them
// (state.Transcripts): there is nothing to restore, save or forget.
type Transcripts struct{}

var _ state.Transcripts = Transcripts{}

// Restore does nothing: the local copy is the transcript.
func (Transcripts) Restore(ctx context.Context, bot, session string, release func()) error {
	return nil
}

// Save does nothing: the transcript stays where the CLI wrote it.
func (Transcripts) Save(ctx context.Context, bot, session string) error { return nil }

// Forget does nothing: a turn not stored is the local copy's, which only
// the CLI reads.
func (Transcripts) Forget(bot, session string) {}
