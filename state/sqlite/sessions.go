package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"brainbot/message"
	"brainbot/state"
)

// Sessions keeps each conversation's current Claude session, and the
// sessions it had before (state.Sessions).
type Sessions struct{ db *db }

var _ state.Sessions = (*Sessions)(nil)

// WatchArrivals returns at once: one process answers every conversation,
// none ever comes from another instance.
func (s *Sessions) WatchArrivals(context.Context, func() time.Time, int, func([]state.RecentSession)) {
}

// RecentSessions lists the current sessions used at since or later, the
// most recently used first, at most limit: the conversations whose next
// message is likeliest soon.
func (s *Sessions) RecentSessions(ctx context.Context, since time.Time, limit int) ([]state.RecentSession, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT bot, chat_id, thread_id, session_id, created, last_used FROM sessions
		 WHERE last_used >= ? ORDER BY last_used DESC LIMIT ?`, ms(since), limit)
	if err != nil {
		return nil, fmt.Errorf("read recent sessions: %w", err)
	}
	defer rows.Close()
	var out []state.RecentSession
	for rows.Next() {
		var r state.RecentSession
		var created, used int64
		if err := rows.Scan(&r.Conversation.Bot, &r.Conversation.Chat, &r.Conversation.Thread, &r.ID, &created, &used); err != nil {
			return nil, fmt.Errorf("read recent sessions: %w", err)
		}
		r.Created, r.LastUsed = fromMS(created), fromMS(used)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read recent sessions: %w", err)
	}
	return out, nil
}

// Session returns the conversation's current session; ok is false if
// there is none.
func (s *Sessions) Session(ctx context.Context, c message.Key) (sess state.Session, ok bool, err error) {
	var created, used int64
	err = s.db.QueryRowContext(ctx,
		`SELECT session_id, created, last_used FROM sessions WHERE bot = ? AND chat_id = ? AND thread_id = ?`,
		c.Bot, c.Chat, c.Thread).Scan(&sess.ID, &created, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return state.Session{}, false, nil
	}
	if err != nil {
		return state.Session{}, false, fmt.Errorf("read session: %w", err)
	}
	sess.Created, sess.LastUsed = fromMS(created), fromMS(used)
	return sess, true, nil
}

// UseSession makes id the conversation's current session and marks it
// used at now. A different current session is moved to the history first.
func (s *Sessions) UseSession(ctx context.Context, c message.Key, id string, now time.Time) error {
	err := s.db.withTx(ctx, func(tx *sql.Tx) error {
		if err := archiveSession(ctx, tx, c, id, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx,
			`INSERT INTO sessions (bot, chat_id, thread_id, session_id, created, last_used) VALUES (?, ?, ?, ?, ?, ?)
			 ON CONFLICT (bot, chat_id, thread_id) DO UPDATE SET last_used = excluded.last_used`,
			c.Bot, c.Chat, c.Thread, id, ms(now), ms(now))
		return err
	})
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	return nil
}

// ResetSession ends the conversation's current session, keeping it in the
// history, so the next message starts a new conversation. It returns the
// ended id ("" if there was none).
func (s *Sessions) ResetSession(ctx context.Context, c message.Key, now time.Time) (ended string, err error) {
	err = s.db.withTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT session_id FROM sessions WHERE bot = ? AND chat_id = ? AND thread_id = ?`,
			c.Bot, c.Chat, c.Thread).Scan(&ended)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		return archiveSession(ctx, tx, c, "", now)
	})
	if err != nil {
		return "", fmt.Errorf("reset session: %w", err)
	}
	return ended, nil
}

// archiveSession moves the current session, unless it is keep, to the
// history.
func archiveSession(ctx context.Context, tx *sql.Tx, c message.Key, keep string, now time.Time) error {
	res, err := tx.ExecContext(ctx,
		`INSERT INTO session_history (bot, chat_id, thread_id, session_id, created, ended)
		 SELECT bot, chat_id, thread_id, session_id, created, ? FROM sessions
		 WHERE bot = ? AND chat_id = ? AND thread_id = ? AND session_id <> ?`,
		ms(now), c.Bot, c.Chat, c.Thread, keep)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE bot = ? AND chat_id = ? AND thread_id = ?`, c.Bot, c.Chat, c.Thread)
	return err
}

// SessionHistory lists the conversation's ended sessions, oldest first.
func (s *Sessions) SessionHistory(ctx context.Context, c message.Key) ([]state.PastSession, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT session_id, created, ended FROM session_history WHERE bot = ? AND chat_id = ? AND thread_id = ? ORDER BY rowid`,
		c.Bot, c.Chat, c.Thread)
	if err != nil {
		return nil, fmt.Errorf("read session history: %w", err)
	}
	defer rows.Close()
	var out []state.PastSession
	for rows.Next() {
		var p state.PastSession
		var created, ended int64
		if err := rows.Scan(&p.ID, &created, &ended); err != nil {
			return nil, fmt.Errorf("read session history: %w", err)
		}
		p.Created, p.Ended = fromMS(created), fromMS(ended)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read session history: %w", err)
	}
	return out, nil
}
