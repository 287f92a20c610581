package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"brainbot/message"
)

// Entry is one update taken in that has not been answered yet.
type Entry struct {
	ID     int64 // assigned by Journal
	Bot    string
	Chat   int64
	Thread int // forum topic, 0 elsewhere
	// Update is the update as Telegram sent it, UpdateID its id, and
	// MeID and MeUsername the bot as its poller knew it. Entries of
	// releases before schema 4 have none: they kept the message the bot
	// had accepted, in the fields below.
	Update     []byte
	UpdateID   int64
	MeID       int64
	MeUsername string
	ChatType   string // private, group, supergroup
	User       int64
	Sender     string // the sender's display name, for group prompts
	MessageID  int
	Text       string
	// Media describes the files the message carries, as the bot encoded
	// them ("" for none); the store keeps it as it is.
	Media string
	// Mode is set once the message was counted against the daily limit
	// (see Charged).
	Mode string
	// Attempts counts how often work on it started (see Attempt).
	Attempts int
	Created  time.Time
	// Scheduled is a message brainbot appended itself (a reminder, a
	// check-in): no Update, no UpdateID; User is its user's.
	Scheduled *message.Scheduled
}

// Entries keeps the journal's entries, the updates taken in and not
// answered yet, with the marks their work left, and each poller's
// offset: an update is stored with its poller's offset in one
// transaction, and cleared once answered. Their hand-over to the intake
// is Deliveries'.
type Entries struct {
	db *db
	// answered are the entries answered but not yet deleted (see Done).
	answered *answered
}

// Journal records an update before any work on it starts and, in the
// same transaction, advances poller's handled update offset to updateID
// (never back): after a crash the update is either in the journal or will
// be delivered again by Telegram, never both and never neither. A
// scheduled entry has no poller (""); one stored already, or within a
// day (journalScheduled), is not stored again: the id is 0 then.
func (s *Entries) Journal(ctx context.Context, e Entry, poller string, updateID int64) (int64, error) {
	var id int64
	err := s.db.withTx(ctx, func(tx *sql.Tx) error {
		var scheduled []byte
		if e.Scheduled != nil {
			fresh, err := journalScheduled(ctx, tx, e.Bot, e.Scheduled, time.Now())
			if err != nil || !fresh {
				return err
			}
			scheduled, _ = json.Marshal(e.Scheduled) // plain fields: cannot fail
		}
		res, err := tx.ExecContext(ctx,
			`INSERT INTO journal (bot, chat_id, thread_id, chat_type, user_id, sender, message_id, text, media, mode, attempts, created,
			 update_id, raw, me_id, me_username, scheduled)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)`,
			e.Bot, e.Chat, e.Thread, cmp.Or(e.ChatType, "private"), e.User, e.Sender, e.MessageID, e.Text, e.Media, e.Mode, ms(e.Created),
			e.UpdateID, e.Update, e.MeID, e.MeUsername, scheduled)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil || poller == "" {
			return err
		}
		return setOffset(ctx, tx, poller, updateID)
	})
	if err != nil {
		return 0, fmt.Errorf("journal message: %w", err)
	}
	return id, nil
}

// setOffset records that poller handled every update up to updateID. A
// poller names one Telegram bot polled for one brain: update ids are per
// Telegram bot, so a brain whose token now names another bot needs
// another poller name.
func setOffset(ctx context.Context, tx *sql.Tx, poller string, updateID int64) error {
	_, err := tx.ExecContext(ctx,
		`INSERT INTO offsets (poller, update_id) VALUES (?, ?)
		 ON CONFLICT (poller) DO UPDATE SET update_id = max(update_id, excluded.update_id)`, poller, updateID)
	return err
}

// Offset is the last update id poller handled (0 if none).
func (s *Entries) Offset(ctx context.Context, poller string) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT update_id FROM offsets WHERE poller = ?`, poller).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read update offset: %w", err)
	}
	return id, nil
}

// Charged records that the entry was counted against its user's daily
// limit and will be answered in mode: a replay must not count it again.
func (s *Entries) Charged(ctx context.Context, id int64, mode string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE journal SET mode = ? WHERE id = ?`, mode, id); err != nil {
		return fmt.Errorf("journal charge: %w", err)
	}
	return nil
}

// Attempt records that work on the entry starts now, with the chosen mode.
func (s *Entries) Attempt(ctx context.Context, id int64, mode string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE journal SET attempts = attempts + 1, mode = ? WHERE id = ?`, mode, id); err != nil {
		return fmt.Errorf("journal attempt: %w", err)
	}
	return nil
}

// Done removes an answered entry. When the database refuses (another
// process holds it locked past the busy timeout), the entry is kept as
// answered in a file beside the database before Done returns the error:
// Pending leaves it out from then on and the next Open deletes it, so the
// message is never answered twice. The caller may retry Done.
func (s *Entries) Done(ctx context.Context, id int64) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM journal WHERE id = ?`, id); err != nil {
		if kerr := s.answered.keep(id); kerr != nil {
			return fmt.Errorf("clear journal entry %d: %w; nor could it be kept as answered, so a restart may answer it again: %w", id, err, kerr)
		}
		return fmt.Errorf("clear journal entry %d: %w (kept as answered in %s: a restart does not answer it again)", id, err, filepath.Base(s.answered.path))
	}
	s.answered.forget(id)
	return nil
}

// deleteAnswered deletes the entries kept as answered; those it cannot
// stay kept.
func (s *Entries) deleteAnswered(ctx context.Context) {
	ids := s.answered.list()
	if len(ids) == 0 {
		return
	}
	err := s.db.withTx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `DELETE FROM journal WHERE id = ?`, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.answered.forget(ids...)
	}
}

// Pending lists the unanswered entries of every bot in arrival order (not
// those kept as answered: see Done).
func (s *Entries) Pending(ctx context.Context) ([]Entry, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, bot, chat_id, thread_id, chat_type, user_id, sender, message_id, text, media, mode, attempts, created,
		 update_id, raw, me_id, me_username, scheduled
		 FROM journal ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var created int64
		var scheduled []byte
		if err := rows.Scan(&e.ID, &e.Bot, &e.Chat, &e.Thread, &e.ChatType, &e.User, &e.Sender, &e.MessageID, &e.Text, &e.Media, &e.Mode, &e.Attempts, &created,
			&e.UpdateID, &e.Update, &e.MeID, &e.MeUsername, &scheduled); err != nil {
			return nil, fmt.Errorf("read journal: %w", err)
		}
		e.Created = fromMS(created)
		if scheduled != nil {
			e.Scheduled = new(message.Scheduled)
			if err := json.Unmarshal(scheduled, e.Scheduled); err != nil {
				return nil, fmt.Errorf("read journal entry %d: %w", e.ID, err)
			}
		}
		if !s.answered.has(e.ID) {
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	return out, nil
}
