package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"brainbot/state"
)

// Voices keeps each user's voice-reply choice per bot (state.Voices).
type Voices struct{ db *db }

var _ state.Voices = (*Voices)(nil)

// Voice reports the user's voice-reply choice; set is false if the user
// never chose (the brain's default applies).
func (s *Voices) Voice(ctx context.Context, bot string, user int64) (on, set bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT on_ FROM voice WHERE bot = ? AND user_id = ?`, bot, user).Scan(&on)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("read voice toggle: %w", err)
	}
	return on, true, nil
}

// SetVoice records the user's voice-reply choice.
func (s *Voices) SetVoice(ctx context.Context, bot string, user int64, on bool) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO voice (bot, user_id, on_) VALUES (?, ?, ?)
		 ON CONFLICT (bot, user_id) DO UPDATE SET on_ = excluded.on_`, bot, user, on)
	if err != nil {
		return fmt.Errorf("save voice toggle: %w", err)
	}
	return nil
}
