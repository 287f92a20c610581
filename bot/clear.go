package bot

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"
)

// journalClearer clears the journal entries of answered messages. The
// store may refuse for a while (another process holds SQLite locked past
// its busy timeout): such entries are retried in the background, with
// backoff, until they are cleared or shutdown's grace ends. The store
// keeps them as answered meanwhile (store.Store.Done), so a replay leaves
// them out and the next start clears them before it replays the journal.
type journalClearer struct {
	store Store
	// launch runs the retries as work of the Manager: shutdown waits for
	// them within its grace, then cancels their context.
	launch   func(func(ctx context.Context))
	min, max time.Duration
}

// clear clears ids, the entries of one answered message.
func (c *journalClearer) clear(ctx context.Context, ids []int64, log *zap.Logger) {
	var left []int64
	for _, id := range ids {
		if err := c.store.Done(ctx, id); err != nil {
			log.Warn("could not clear journal entry; retrying", zap.Int64("journal_id", id), zap.Error(err))
			left = append(left, id)
		}
	}
	if len(left) > 0 {
		c.launch(func(ctx context.Context) { c.retry(ctx, left, log) })
	}
}

// retry clears ids until none is left or ctx ends.
func (c *journalClearer) retry(ctx context.Context, ids []int64, log *zap.Logger) {
	all := slices.Clone(ids)
	wait := &backoff{min: c.min, max: c.max, next: c.min}
	var last error
	for len(ids) > 0 {
		if !wait.wait(ctx) {
			log.Error("journal entries not cleared before shutdown", zap.Int64s("journal_ids", ids), zap.Error(last))
			return
		}
		ids = slices.DeleteFunc(ids, func(id int64) bool {
			err := c.store.Done(ctx, id)
			if err != nil {
				last = err
			}
			return err == nil
		})
	}
	log.Info("journal entry cleared after retrying", zap.Int64s("journal_ids", all))
}
