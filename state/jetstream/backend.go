package jetstream

import (
	"context"
	"time"

	"brainbot/state"
)

// Backend is the cluster as a backend of brainbot's state (package
// state): the stream is the log, the buckets keep the state, the object
// store the transcripts.
type Backend struct {
	*Cluster
	*State
	*Transcripts
	*userData
}

// Two embedded types promoting the same method would lose it here.
var _ state.Backend = (*Backend)(nil)

// Backend returns the cluster as a backend; sessionFile locates a
// session's transcript on this machine (claude.Driver.SessionFile).
func (c *Cluster) Backend(sessionFile func(bot, session string) string) *Backend {
	t := c.Transcripts(sessionFile)
	s := c.State()
	return &Backend{Cluster: c, State: s, Transcripts: t, userData: &userData{conn: c.conn, records: s.records.kv,
		daily: s.tally.daily, button: s.buttonSets.kv, notes: s.memories.kv, schedules: s.schedules.kv, objects: t.objects, updates: c.updates.stream}}
}

// Prune prunes nothing: the buckets and streams expire their records by
// themselves, each at its own age (docs/scaling.md).
func (b *Backend) Prune(context.Context, time.Time, state.Retention) (state.Pruned, error) {
	return state.Pruned{}, nil
}
