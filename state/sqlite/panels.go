package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"brainbot/state"
)

// Panels journals panel runs (state.Panels), and which of them this
// process runs.
type Panels struct {
	db   *db
	runs runsHere
}

var _ state.Panels = (*Panels)(nil)

// StartPanel records a new running panel run, unless one exists for the
// same message (ErrPanelStarted) or one still runs in the chat
// (ErrPanelBusy).
func (s *Panels) StartPanel(ctx context.Context, r state.PanelRun) error {
	err := s.db.withTx(ctx, func(tx *sql.Tx) error {
		var same, running int
		err := tx.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM panel_runs WHERE chat_id = ? AND message_id = ?),
			(SELECT count(*) FROM panel_runs WHERE running = 1 AND chat_id = ?)`,
			r.Chat, r.MessageID, r.Chat).Scan(&same, &running)
		switch {
		case err != nil:
			return err
		case same > 0:
			return state.ErrPanelStarted
		case running > 0:
			return state.ErrPanelBusy
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO panel_runs (id, chat_id, thread_id, message_id, running, run, created, updated)
			VALUES (?, ?, ?, ?, 1, ?, ?, ?)`, r.ID, r.Chat, r.Thread, r.MessageID, string(r.Run), ms(r.Created), ms(r.Created))
		return err
	})
	if err == nil {
		s.runs.claim(r.ID)
	}
	return err
}

// SavePanel stores a run's state; finished marks it no longer running.
func (s *Panels) SavePanel(ctx context.Context, id string, run []byte, finished bool, now time.Time) error {
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
	if finished {
		s.runs.drop(id)
	}
	return nil
}

// RunningPanels lists the runs not finished that this process does not
// run yet, oldest first: at a start, the ones an earlier process left.
// The runs it lists are this process's from then on, as are the runs it
// starts: a second look lists none of them.
func (s *Panels) RunningPanels(ctx context.Context) ([]state.PanelRun, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, chat_id, thread_id, message_id, run, created FROM panel_runs
		WHERE running = 1 ORDER BY created, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []state.PanelRun
	for rows.Next() {
		var r state.PanelRun
		var run string
		var created int64
		if err := rows.Scan(&r.ID, &r.Chat, &r.Thread, &r.MessageID, &run, &created); err != nil {
			return nil, err
		}
		r.Run, r.Created = []byte(run), fromMS(created)
		if s.runs.claim(r.ID) {
			out = append(out, r)
		}
	}
	return out, rows.Err()
}

// runsHere are the panel runs this process runs.
type runsHere struct {
	mu  sync.Mutex
	ids map[string]bool
}

// claim makes run id this process's; false if it was already.
func (r *runsHere) claim(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids[id] {
		return false
	}
	if r.ids == nil {
		r.ids = map[string]bool{}
	}
	r.ids[id] = true
	return true
}

// drop: run id finished.
func (r *runsHere) drop(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ids, id)
}
