package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"brainbot/state"
)

// Memories keeps the notes a persona keeps about each user, per bot
// (state.Memories), in the notes table.
type Memories struct{ db *db }

var _ state.Memories = (*Memories)(nil)

// Notes lists user's notes with bot, the oldest first.
func (m *Memories) Notes(ctx context.Context, bot string, user int64) ([]state.Note, error) {
	rows, err := m.db.QueryContext(ctx, `SELECT id, text, created FROM notes WHERE bot = ? AND user_id = ? ORDER BY id`, bot, user)
	if err != nil {
		return nil, fmt.Errorf("read notes: %w", err)
	}
	defer rows.Close()
	var notes []state.Note
	for rows.Next() {
		var id, created int64
		var n state.Note
		if err := rows.Scan(&id, &n.Text, &created); err != nil {
			return nil, fmt.Errorf("read notes: %w", err)
		}
		n.ID, n.Created = strconv.FormatInt(id, 10), fromMS(created)
		notes = append(notes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read notes: %w", err)
	}
	return notes, nil
}

// AddNote keeps text as user's newest note with bot, unless limit (> 0)
// are kept already: counted and written in one transaction, so two
// calls at once never pass the bound.
func (m *Memories) AddNote(ctx context.Context, bot string, user int64, text string, limit int, now time.Time) (state.Note, error) {
	var id int64
	err := m.db.withTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM notes WHERE bot = ? AND user_id = ?`, bot, user).Scan(&n); err != nil {
			return err
		}
		if limit > 0 && n >= limit {
			return state.ErrNotesFull
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO notes (bot, user_id, text, created) VALUES (?, ?, ?, ?)`, bot, user, text, ms(now))
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return state.Note{}, fmt.Errorf("keep a note: %w", err)
	}
	return state.Note{ID: strconv.FormatInt(id, 10), Text: text, Created: fromMS(ms(now))}, nil
}

// DropNote deletes user's note id with bot; false if there is none.
func (m *Memories) DropNote(ctx context.Context, bot string, user int64, id string) (bool, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return false, nil // no note has such an id
	}
	res, err := m.db.ExecContext(ctx, `DELETE FROM notes WHERE bot = ? AND user_id = ? AND id = ?`, bot, user, n)
	if err != nil {
		return false, fmt.Errorf("drop a note: %w", err)
	}
	gone, err := res.RowsAffected()
	return gone > 0, err
}

// DropNotes deletes every note of user's with bot.
func (m *Memories) DropNotes(ctx context.Context, bot string, user int64) (int, error) {
	res, err := m.db.ExecContext(ctx, `DELETE FROM notes WHERE bot = ? AND user_id = ?`, bot, user)
	if err != nil {
		return 0, fmt.Errorf("drop the notes: %w", err)
	}
	gone, err := res.RowsAffected()
	return int(gone), err
}
