package sqlite

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// clear clears the entry id of bot, done with. The database may refuse
// for a while (another process holds it locked past its busy timeout):
// the entry is then retried in the background, with backoff, until it is
// cleared or the store is closed. It is kept as answered meanwhile (see
// Done), so a replay leaves it out and the next start clears it before it
// hands the journal out.
func (s *Entries) clear(id int64, bot string) {
	log := s.db.log.With(zap.String("bot", bot))
	err := s.Done(context.Background(), id)
	if err == nil {
		return
	}
	log.Warn("could not clear journal entry; retrying", zap.Int64("journal_id", id), zap.Error(err))
	s.db.launch(func(ctx context.Context) { s.retryClear(ctx, id, log) })
}

// retryClear clears id until it is cleared or ctx ends.
func (s *Entries) retryClear(ctx context.Context, id int64, log *zap.Logger) {
	var last error
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			log.Error("journal entries not cleared before shutdown", zap.Int64s("journal_ids", []int64{id}), zap.Error(last))
			return
		case <-time.After(s.db.retry.wait(n)):
		}
		if last = s.Done(ctx, id); last == nil {
			log.Info("journal entry cleared after retrying", zap.Int64s("journal_ids", []int64{id}))
			return
		}
	}
}
