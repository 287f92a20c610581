package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// PanelRun is one panel run as journaled: where it runs and its whole
// state (Run, the panel engine's JSON), saved after every step.
type PanelRun struct {
	ID        string
	Chat      int64
	Thread    int
	MessageID int // the /panel message that started it
	Run       []byte
	Created   time.Time
}

var (
	// ErrPanelStarted: a run for this /panel message exists already (it
	// reached another member bot first).
	ErrPanelStarted = errors.New("store: a panel run for this message exists")
	// ErrPanelBusy: another panel runs in the chat.
	ErrPanelBusy = errors.New("store: a panel is running in this chat")
)

// StartPanel records a new running panel run, unless one exists for the
// same message (ErrPanelStarted) or one still runs in the chat
// (ErrPanelBusy).
func (s *Store) StartPanel(ctx context.Context, r PanelRun) error {
	return s.withTx(ctx, func(tx *sql.Tx) error {
		var same, running int
		err := tx.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM panel_runs WHERE chat_id = ? AND message_id = ?),
			(SELECT count(*) FROM panel_runs WHERE running = 1 AND chat_id = ?)`,
			r.Chat, r.MessageID, r.Chat).Scan(&same, &running)
		switch {
		case err != nil:
			return err
		case same > 0:
			return ErrPanelStarted
		case running > 0:
			return ErrPanelBusy
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO panel_runs (id, chat_id, thread_id, message_id, running, run, created, updated)
			VALUES (?, ?, ?, ?, 1, ?, ?, ?)`, r.ID, r.Chat, r.Thread, r.MessageID, string(r.Run), ms(r.Created), ms(r.Created))
		return err
	})
}

// SavePanel stores a run's state; finished marks it no longer running.
func (s *Store) SavePanel(ctx context.Context, id string, run []byte, finished bool, now time.Time) error {
	running := 1
	if finished {
		running = 0
	}
	res, err := s.db.ExecContext(ctx, `UPDATE panel_runs SET run = ?, running = ?, updated = ? WHERE id = ?`,
		string(run), running, ms(now), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: no panel run %s", id)
	}
	return nil
}

// RunningPanels lists the runs not finished, oldest first: the ones a
// restart resumes.
func (s *Store) RunningPanels(ctx context.Context) ([]PanelRun, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, chat_id, thread_id, message_id, run, created FROM panel_runs
		WHERE running = 1 ORDER BY created, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PanelRun
	for rows.Next() {
		var r PanelRun
		var run string
		var created int64
		if err := rows.Scan(&r.ID, &r.Chat, &r.Thread, &r.MessageID, &run, &created); err != nil {
			return nil, err
		}
		r.Run, r.Created = []byte(run), fromMS(created)
		out = append(out, r)
	}
	return out, rows.Err()
}
