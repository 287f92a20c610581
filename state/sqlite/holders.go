package sqlite

import (
	"context"
	"fmt"
	"time"

	"brainbot/state"
)

// Holders keeps which brain has each Telegram bot (state.Holders).
type Holders struct{ db *db }

var _ state.Holders = (*Holders)(nil)

// HoldTelegramBot records that brain (its id) has the Telegram bot number
// (the part of a token before the colon), from now on.
func (s *Holders) HoldTelegramBot(ctx context.Context, number, brain string, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO telegram_bots (bot_number, brain, since) VALUES (?, ?, ?)
		ON CONFLICT (bot_number) DO UPDATE SET brain = excluded.brain, since = excluded.since WHERE brain != excluded.brain`,
		number, brain, ms(now))
	if err != nil {
		return fmt.Errorf("record the brain of Telegram bot %s: %w", number, err)
	}
	return nil
}

// TelegramBotHolders returns the brain that has each Telegram bot, by bot
// number.
func (s *Holders) TelegramBotHolders(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT bot_number, brain FROM telegram_bots`)
	if err != nil {
		return nil, fmt.Errorf("read the brains of the Telegram bots: %w", err)
	}
	defer rows.Close()
	holders := map[string]string{}
	for rows.Next() {
		var number, brain string
		if err := rows.Scan(&number, &brain); err != nil {
			return nil, fmt.Errorf("read the brains of the Telegram bots: %w", err)
		}
		holders[number] = brain
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the brains of the Telegram bots: %w", err)
	}
	return holders, nil
}
