package sqlite

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// clear clears the entry id of bot, done with. The store may refuse for a
// while (another process holds SQLite locked past its busy timeout): the
// entry is then retried in the background, with backoff, until it is
// cleared or the owner's shutdown grace ends. The store keeps it as
// answered meanwhile (Store.Done), so a replay leaves it out and the
// next start clears it before it hands the journal out.
func (j *Journal) clear(id int64, bot string) {
	log := j.log.With(zap.String("bot", bot))
	err := j.store.Done(context.Background(), id)
	if err == nil {
		return
	}
	log.Warn("could not clear journal entry; retrying", zap.Int64("journal_id", id), zap.Error(err))
	j.store.launch(func(ctx context.Context) { j.retryClear(ctx, id, log) })
}

// retryClear clears id until it is cleared or ctx ends.
func (j *Journal) retryClear(ctx context.Context, id int64, log *zap.Logger) {
	wait, last := j.retryMin, error(nil)
	for {
		select {
		case <-ctx.Done():
			log.Error("journal entries not cleared before shutdown", zap.Int64s("journal_ids", []int64{id}), zap.Error(last))
			return
		case <-time.After(wait):
		}
		if last = j.store.Done(ctx, id); last == nil {
			log.Info("journal entry cleared after retrying", zap.Int64s("journal_ids", []int64{id}))
			return
		}
		wait = min(2*wait, j.retryMax)
	}
}
