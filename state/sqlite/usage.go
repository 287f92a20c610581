package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"brainbot/state"
)

// Spending keeps what requests cost (state.Spending).
type Spending struct{ db *db }

var _ state.Spending = (*Spending)(nil)

// RecordUsage stores what a request cost.
func (s *Spending) RecordUsage(ctx context.Context, u state.Usage) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO usage (at, bot, chat_id, user_id, request_id, mode, outcome, input_tokens, output_tokens,
		 cache_read_tokens, cache_write_tokens, claude_usd, openai_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ms(u.At), u.Bot, u.Chat, u.User, u.RequestID, u.Mode, u.Outcome, u.InputTokens, u.OutputTokens,
		u.CacheReadTokens, u.CacheWriteTokens, u.ClaudeUSD, u.OpenAIUSD)
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	return nil
}

// UsageReport sums the usage f selects per bot (and user) and mode.
func (s *Spending) UsageReport(ctx context.Context, f state.UsageFilter) ([]state.UsageLine, error) {
	user := "0"
	if f.ByUser {
		user = "user_id"
	}
	query := `SELECT bot, ` + user + `, mode, COUNT(*), SUM(outcome = 'error'),
		SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens),
		SUM(claude_usd), SUM(openai_usd)
		FROM usage WHERE at >= ?`
	args := []any{ms(f.Since)}
	if f.Bot != "" {
		query += ` AND bot = ?`
		args = append(args, f.Bot)
	}
	query += ` GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("usage report: %w", err)
	}
	defer rows.Close()
	var out []state.UsageLine
	for rows.Next() {
		var l state.UsageLine
		if err := rows.Scan(&l.Bot, &l.User, &l.Mode, &l.Requests, &l.Errors, &l.InputTokens, &l.OutputTokens,
			&l.CacheReadTokens, &l.CacheWriteTokens, &l.ClaudeUSD, &l.OpenAIUSD); err != nil {
			return nil, fmt.Errorf("usage report: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage report: %w", err)
	}
	return out, nil
}

// SpentToday is what a bot's requests cost on now's UTC day, Claude and
// OpenAI together; with user > 0, only that user's.
func (s *Spending) SpentToday(ctx context.Context, bot string, user int64, now time.Time) (float64, error) {
	y, m, d := now.UTC().Date()
	midnight := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	where := []string{"bot = ?", "at >= ?", "at < ?"}
	args := []any{bot, ms(midnight), ms(state.NextReset(now))}
	if user > 0 {
		where = append(where, "user_id = ?")
		args = append(args, user)
	}
	var usd float64
	err := s.db.QueryRowContext(ctx,
		`SELECT COALESCE(SUM(claude_usd + openai_usd), 0) FROM usage WHERE `+strings.Join(where, " AND "), args...).Scan(&usd)
	if err != nil {
		return 0, fmt.Errorf("spent today: %w", err)
	}
	return usd, nil
}
