package sqlite

import (
	"context"
	"fmt"
	"time"

	"brainbot/state"
)

// Maintenance keeps the database file in shape: it drops what the
// retention no longer keeps (state.Maintenance) and copies the file for a
// backup.
type Maintenance struct{ db *db }

var _ state.Maintenance = (*Maintenance)(nil)

// Prune deletes the daily counters, ended sessions, usage records and
// buttons that r no longer
// keeps at now. Current sessions, voice toggles and the journal are never
// pruned.
func (s *Maintenance) Prune(ctx context.Context, now time.Time, r state.Retention) (state.Pruned, error) {
	var p state.Pruned
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
