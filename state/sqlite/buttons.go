package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"brainbot/message"
	"brainbot/state"
)

// ButtonSets keeps what the buttons under the bots' messages mean
// (state.ButtonSets).
type ButtonSets struct{ db *db }

var _ state.ButtonSets = (*ButtonSets)(nil)

// SaveButtons records b. A question closes the conversation's questions
// still open: only the latest may be answered by a tap.
func (s *ButtonSets) SaveButtons(ctx context.Context, b state.Buttons) error {
	options, _ := json.Marshal(b.Options) // strings: cannot fail
	return s.db.withTx(ctx, func(tx *sql.Tx) error {
		if b.Kind == state.ButtonsQuestion {
			if _, err := closeQuestions(ctx, tx, b.Conversation, 0); err != nil {
				return fmt.Errorf("save buttons: %w", err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO buttons (id, kind, bot, chat_id, thread_id, message_id, user_id, options, text, created)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, b.ID, b.Kind, b.Conversation.Bot, b.Conversation.Chat, b.Conversation.Thread,
			b.MessageID, b.User, string(options), b.Text, ms(b.Created))
		if err != nil {
			return fmt.Errorf("save buttons: %w", err)
		}
		return nil
	})
}

// LookupButtons returns the buttons with id; ok is false for none.
func (s *ButtonSets) LookupButtons(ctx context.Context, id string) (b state.Buttons, ok bool, err error) {
	var options string
	var created int64
	err = s.db.QueryRowContext(ctx, `SELECT id, kind, bot, chat_id, thread_id, message_id, user_id, options, text, created, used_by, file
		FROM buttons WHERE id = ?`, id).Scan(&b.ID, &b.Kind, &b.Conversation.Bot, &b.Conversation.Chat, &b.Conversation.Thread,
		&b.MessageID, &b.User, &options, &b.Text, &created, &b.UsedBy, &b.File)
	if errors.Is(err, sql.ErrNoRows) {
		return state.Buttons{}, false, nil
	}
	if err != nil {
		return state.Buttons{}, false, fmt.Errorf("look up buttons: %w", err)
	}
	b.Created = fromMS(created)
	if err := json.Unmarshal([]byte(options), &b.Options); err != nil {
		return state.Buttons{}, false, fmt.Errorf("look up buttons: %w", err)
	}
	return b, true, nil
}

// UseButtons marks buttons id used by the tap in update; false when
// another tap used them first, or they are closed. The same update again
// (a replay after a restart) uses them again.
func (s *ButtonSets) UseButtons(ctx context.Context, id string, update int64) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE buttons SET used_by = ? WHERE id = ? AND used_by IN (0, ?)`, update, id, update)
	if err != nil {
		return false, fmt.Errorf("use buttons: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// CloseQuestions closes the conversation's questions still open that
// asked user (who answered in words) and returns them, so their buttons
// can go.
func (s *ButtonSets) CloseQuestions(ctx context.Context, c message.Key, user int64) (closed []state.Buttons, err error) {
	// Most messages find none: a read, not a write, for them.
	var open int
	err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM buttons WHERE bot = ? AND chat_id = ? AND thread_id = ? AND kind = ? AND used_by = 0`,
		c.Bot, c.Chat, c.Thread, state.ButtonsQuestion).Scan(&open)
	if err != nil {
		return nil, fmt.Errorf("close questions: %w", err)
	}
	if open == 0 {
		return nil, nil
	}
	err = s.db.withTx(ctx, func(tx *sql.Tx) error {
		closed, err = closeQuestions(ctx, tx, c, user)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("close questions: %w", err)
	}
	return closed, nil
}

// closeQuestions closes the conversation's open questions, those that
// asked user unless user is 0.
func closeQuestions(ctx context.Context, tx *sql.Tx, c message.Key, user int64) ([]state.Buttons, error) {
	rows, err := tx.QueryContext(ctx, `UPDATE buttons SET used_by = ? WHERE bot = ? AND chat_id = ? AND thread_id = ? AND kind = ? AND used_by = 0
		AND ? IN (0, user_id) RETURNING id, message_id`, state.ButtonsClosed, c.Bot, c.Chat, c.Thread, state.ButtonsQuestion, user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var closed []state.Buttons
	for rows.Next() {
		b := state.Buttons{Kind: state.ButtonsQuestion, Conversation: c, UsedBy: state.ButtonsClosed}
		if err := rows.Scan(&b.ID, &b.MessageID); err != nil {
			return nil, err
		}
		closed = append(closed, b)
	}
	return closed, rows.Err()
}

// PlaceButtons records the message buttons id went out under: they are
// kept before their message is sent, so a tap never comes first.
func (s *ButtonSets) PlaceButtons(ctx context.Context, id string, messageID int) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE buttons SET message_id = ? WHERE id = ?`, messageID, id); err != nil {
		return fmt.Errorf("place buttons: %w", err)
	}
	return nil
}

// KeepButtonsFile records the file a tap on buttons id made.
func (s *ButtonSets) KeepButtonsFile(ctx context.Context, id, path string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE buttons SET file = ? WHERE id = ?`, path, id); err != nil {
		return fmt.Errorf("keep the buttons' file: %w", err)
	}
	return nil
}
