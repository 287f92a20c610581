package store

import (
	"context"
	"fmt"
	"time"
)

// Retention bounds what the store keeps that no request reads any more.
// A zero field keeps that kind of row for ever.
type Retention struct {
	// DailyDays is how many UTC days of message counters are kept, today
	// included. Limits read only today's.
	DailyDays int
	// History is how long an ended session stays in the session history
	// after it ended.
	History time.Duration
	// Usage is how long a request's usage record is kept (for reports).
	Usage time.Duration
	// Buttons is how long what a message's buttons mean is kept; a tap on
	// older ones is told they expired.
	Buttons time.Duration
}

// DefaultRetention keeps today's and yesterday's counters, ended sessions
// for 90 days (brainbot never resumes them; they are there for an admin
// looking into a past conversation) and usage records for 400 days (a
// year's reports), and buttons as long as a brain may keep them working
// (MaxButtonsAge).
var DefaultRetention = Retention{DailyDays: 2, History: 90 * 24 * time.Hour, Usage: 400 * 24 * time.Hour, Buttons: MaxButtonsAge}

// MaxButtonsAge is the longest a brain may keep its buttons working
// (buttons.max_age); the cluster's bucket keeps them as long.
const MaxButtonsAge = 30 * 24 * time.Hour

// Pruned counts the rows Prune deleted.
type Pruned struct {
	Daily, History, Usage, Buttons int64
}

// Prune deletes the daily counters, ended sessions, usage records and
// buttons that r no longer
// keeps at now. Current sessions, voice toggles and the journal are never
// pruned.
func (s *Store) Prune(ctx context.Context, now time.Time, r Retention) (Pruned, error) {
	var p Pruned
	if r.DailyDays > 0 {
		oldest := day(now.UTC().AddDate(0, 0, 1-r.DailyDays))
		res, err := s.db.ExecContext(ctx, `DELETE FROM daily WHERE day < ?`, oldest)
		if err != nil {
			return p, fmt.Errorf("prune daily counters: %w", err)
		}
		p.Daily, _ = res.RowsAffected() // SQLite always knows it
	}
	if r.History > 0 {
		res, err := s.db.ExecContext(ctx, `DELETE FROM session_history WHERE ended < ?`, ms(now.Add(-r.History)))
		if err != nil {
			return p, fmt.Errorf("prune session history: %w", err)
		}
		p.History, _ = res.RowsAffected()
	}
	if r.Usage > 0 {
		res, err := s.db.ExecContext(ctx, `DELETE FROM usage WHERE at < ?`, ms(now.Add(-r.Usage)))
		if err != nil {
			return p, fmt.Errorf("prune usage records: %w", err)
		}
		p.Usage, _ = res.RowsAffected()
	}
	if r.Buttons > 0 {
		res, err := s.db.ExecContext(ctx, `DELETE FROM buttons WHERE created < ?`, ms(now.Add(-r.Buttons)))
		if err != nil {
			return p, fmt.Errorf("prune buttons: %w", err)
		}
		p.Buttons, _ = res.RowsAffected()
	}
	return p, nil
}
