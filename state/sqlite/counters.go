package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"brainbot/state"
)

// Counters counts each user's messages per bot and UTC day
// (state.Counters).
type Counters struct{ db *db }

var _ state.Counters = (*Counters)(nil)

// day is the UTC calendar day of t; counters reset at UTC midnight.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// TakeDaily counts one message for the user today, unless limit (> 0) is
// already reached; then ok is false and nothing is counted. resetAt is when
// today's count resets. A limit <= 0 means unlimited (still counted).
func (s *Counters) TakeDaily(ctx context.Context, bot string, user int64, limit int, now time.Time) (ok bool, resetAt time.Time, err error) {
	resetAt = state.NextReset(now)
	err = s.db.withTx(ctx, func(tx *sql.Tx) error {
		var count int
		err := tx.QueryRowContext(ctx, `SELECT count FROM daily WHERE bot = ? AND user_id = ? AND day = ?`,
			bot, user, day(now)).Scan(&count)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if limit > 0 && count >= limit {
			return nil
		}
		ok = true
		_, err = tx.ExecContext(ctx,
			`INSERT INTO daily (bot, user_id, day, count) VALUES (?, ?, ?, 1)
			 ON CONFLICT (bot, user_id, day) DO UPDATE SET count = count + 1`,
			bot, user, day(now))
		return err
	})
	if err != nil {
		return false, resetAt, fmt.Errorf("count daily message: %w", err)
	}
	return ok, resetAt, nil
}

// DailyCount is how many messages the user sent on now's UTC day.
func (s *Counters) DailyCount(ctx context.Context, bot string, user int64, now time.Time) (int, error) {
	var count int
	err := s.db.QueryRowContext(ctx, `SELECT count FROM daily WHERE bot = ? AND user_id = ? AND day = ?`,
		bot, user, day(now)).Scan(&count)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read daily count: %w", err)
	}
	return count, nil
}
