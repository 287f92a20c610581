package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"brainbot/message"
	"brainbot/state"
)

// Schedules keeps the reminders users asked for (state.Reminders) and
// what check-ins go by (state.Contacts), in the reminders and contacts
// tables.
type Schedules struct{ db *db }

var (
	_ state.Reminders = (*Schedules)(nil)
	_ state.Contacts  = (*Schedules)(nil)
)

// AddReminder keeps r unless its user has limit (> 0) reminders with its
// bot: counted and written in one transaction, so adds at once never
// pass the bound. Its id is the row's, never reused.
func (s *Schedules) AddReminder(ctx context.Context, r state.Reminder, limit int) (state.Reminder, error) {
	r.Due, r.Created = fromMS(ms(r.Due)), fromMS(ms(r.Created))
	err := s.db.withTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM reminders WHERE bot = ? AND user_id = ?`, r.Key.Bot, r.User).Scan(&n); err != nil {
			return err
		}
		if limit > 0 && n >= limit {
			return state.ErrRemindersFull
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO reminders (bot, chat_id, thread_id, user_id, text, due, created)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, r.Key.Bot, r.Key.Chat, r.Key.Thread, r.User, r.Text, ms(r.Due), ms(r.Created))
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		r.ID = strconv.FormatInt(id, 10)
		return err
	})
	if err != nil {
		return state.Reminder{}, fmt.Errorf("keep a reminder: %w", err)
	}
	return r, nil
}

const reminderColumns = `id, bot, chat_id, thread_id, user_id, text, due, created`

// Reminders lists user's pending reminders with bot, the soonest first.
func (s *Schedules) Reminders(ctx context.Context, bot string, user int64) ([]state.Reminder, error) {
	return s.reminders(ctx, `SELECT `+reminderColumns+` FROM reminders WHERE bot = ? AND user_id = ? ORDER BY due, id`, bot, user)
}

// DueReminders lists the reminders due at now or earlier, the soonest
// first, at most limit (0: all).
func (s *Schedules) DueReminders(ctx context.Context, now time.Time, limit int) ([]state.Reminder, error) {
	if limit <= 0 {
		limit = -1 // SQLite's no limit
	}
	return s.reminders(ctx, `SELECT `+reminderColumns+` FROM reminders WHERE due <= ? ORDER BY due, id LIMIT ?`, ms(now), limit)
}

func (s *Schedules) reminders(ctx context.Context, query string, args ...any) ([]state.Reminder, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read reminders: %w", err)
	}
	defer rows.Close()
	var out []state.Reminder
	for rows.Next() {
		var r state.Reminder
		var id, due, created int64
		if err := rows.Scan(&id, &r.Key.Bot, &r.Key.Chat, &r.Key.Thread, &r.User, &r.Text, &due, &created); err != nil {
			return nil, fmt.Errorf("read reminders: %w", err)
		}
		r.ID, r.Due, r.Created = strconv.FormatInt(id, 10), fromMS(due), fromMS(created)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read reminders: %w", err)
	}
	return out, nil
}

// CancelReminder deletes user's reminder id with bot; false if there is
// none.
func (s *Schedules) CancelReminder(ctx context.Context, bot string, user int64, id string) (bool, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return false, nil // no reminder has such an id
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM reminders WHERE bot = ? AND user_id = ? AND id = ?`, bot, user, n)
	if err != nil {
		return false, fmt.Errorf("cancel a reminder: %w", err)
	}
	gone, err := res.RowsAffected()
	return gone > 0, err
}

// DoneReminder deletes reminder id of bot, if it is still there.
func (s *Schedules) DoneReminder(ctx context.Context, bot, id string) error {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil // no reminder has such an id: none to delete
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM reminders WHERE bot = ? AND id = ?`, bot, n); err != nil {
		return fmt.Errorf("clear a reminder: %w", err)
	}
	return nil
}

// Contact is user's with bot.
func (s *Schedules) Contact(ctx context.Context, bot string, user int64) (state.Contact, bool, error) {
	c := state.Contact{Bot: bot, User: user}
	var wrote int64
	var checkIns string
	err := s.db.QueryRowContext(ctx, `SELECT zone, wrote, check_ins, declined, blocked FROM contacts WHERE bot = ? AND user_id = ?`,
		bot, user).Scan(&c.Zone, &wrote, &checkIns, &c.Declined, &c.Blocked)
	if errors.Is(err, sql.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("read a contact: %w", err)
	}
	c.Wrote, c.CheckIns = fromMSOrZero(wrote), checkInTimes(checkIns)
	return c, wrote != 0, nil
}

// fromMSOrZero is fromMS, with 0 the zero time (never).
func fromMSOrZero(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return fromMS(v)
}

// checkInTimes reads a contact's check_ins, a JSON array of Unix
// milliseconds, the oldest first.
func checkInTimes(v string) []time.Time {
	var at []int64
	_ = json.Unmarshal([]byte(v), &at) // written by CheckedIn: unreadable is none
	var out []time.Time
	for _, t := range at {
		out = append(out, fromMS(t))
	}
	return out
}

// changeContact applies set (SQL assignments of ?3) to user's contact
// with bot, made first if there is none.
func (s *Schedules) changeContact(ctx context.Context, what, bot string, user int64, set string, arg any) error {
	err := s.db.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO contacts (bot, user_id) VALUES (?, ?) ON CONFLICT (bot, user_id) DO NOTHING`,
			bot, user); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE contacts SET `+set+` WHERE bot = ?1 AND user_id = ?2`, bot, user, arg)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Wrote records that user wrote to bot privately at now: a block is over.
func (s *Schedules) Wrote(ctx context.Context, bot string, user int64, now time.Time) error {
	return s.changeContact(ctx, "record a message", bot, user, `wrote = max(wrote, ?3), blocked = 0`, ms(now))
}

// SetTimeZone keeps user's time zone with bot.
func (s *Schedules) SetTimeZone(ctx context.Context, bot string, user int64, zone string) error {
	return s.changeContact(ctx, "keep a time zone", bot, user, `zone = ?3`, zone)
}

// DeclineCheckIns records user's no, or their yes again.
func (s *Schedules) DeclineCheckIns(ctx context.Context, bot string, user int64, declined bool) error {
	return s.changeContact(ctx, "record a no to check-ins", bot, user, `declined = ?3`, declined)
}

// CheckedIn adds at to user's check-ins with bot, keeping those of the
// week up to the latest; read and written in one transaction.
func (s *Schedules) CheckedIn(ctx context.Context, bot string, user int64, at time.Time) error {
	err := s.db.withTx(ctx, func(tx *sql.Tx) error {
		var v string
		err := tx.QueryRowContext(ctx, `SELECT check_ins FROM contacts WHERE bot = ? AND user_id = ?`, bot, user).Scan(&v)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var times []int64
		for _, t := range checkInTimes(v) {
			times = append(times, ms(t))
		}
		times = keptCheckIns(append(times, ms(at)))
		b, _ := json.Marshal(times) // numbers: cannot fail
		_, err = tx.ExecContext(ctx, `INSERT INTO contacts (bot, user_id, check_ins, last_check_in) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (bot, user_id) DO UPDATE SET check_ins = ?3, last_check_in = ?4`, bot, user, string(b), times[len(times)-1])
		return err
	})
	if err != nil {
		return fmt.Errorf("record a check-in: %w", err)
	}
	return nil
}

// keptCheckIns sorts check-ins (Unix milliseconds) and keeps those of the
// week up to the latest (state.CheckInsKept).
func keptCheckIns(times []int64) []int64 {
	slices.Sort(times)
	from := times[len(times)-1] - state.CheckInsKept.Milliseconds()
	return slices.DeleteFunc(times, func(t int64) bool { return t <= from })
}

// EndSchedule deletes user's reminders with bot and marks them blocked,
// in one transaction.
func (s *Schedules) EndSchedule(ctx context.Context, bot string, user int64) error {
	err := s.db.withTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM reminders WHERE bot = ? AND user_id = ?`, bot, user); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO contacts (bot, user_id, blocked) VALUES (?, ?, 1)
			ON CONFLICT (bot, user_id) DO UPDATE SET blocked = 1`, bot, user)
		return err
	})
	if err != nil {
		return fmt.Errorf("end a schedule: %w", err)
	}
	return nil
}

// QuietContacts lists bot's contacts quiet since since, the longest quiet
// first, at most limit (0: all).
func (s *Schedules) QuietContacts(ctx context.Context, bot string, since time.Time, limit int) ([]state.Contact, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.db.QueryContext(ctx, `SELECT user_id, zone, wrote, check_ins FROM contacts
		WHERE bot = ?1 AND wrote > 0 AND max(wrote, last_check_in) < ?2 AND declined = 0 AND blocked = 0
		ORDER BY max(wrote, last_check_in), user_id LIMIT ?3`, bot, ms(since), limit)
	if err != nil {
		return nil, fmt.Errorf("list quiet contacts: %w", err)
	}
	defer rows.Close()
	var out []state.Contact
	for rows.Next() {
		c := state.Contact{Bot: bot}
		var wrote int64
		var checkIns string
		if err := rows.Scan(&c.User, &c.Zone, &wrote, &checkIns); err != nil {
			return nil, fmt.Errorf("list quiet contacts: %w", err)
		}
		c.Wrote, c.CheckIns = fromMS(wrote), checkInTimes(checkIns)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list quiet contacts: %w", err)
	}
	return out, nil
}

// scheduledKept is how long the log remembers the id of a scheduled
// message it stored: appended again within it, it is not stored again.
const scheduledKept = 24 * time.Hour

// journalScheduled stores a scheduled message in the journal unless the
// same (bot, id) was stored within scheduledKept; fresh is false then.
// It forgets the ids older than that in the same transaction.
func journalScheduled(ctx context.Context, tx *sql.Tx, bot string, sch *message.Scheduled, now time.Time) (fresh bool, err error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM scheduled_log WHERE appended < ?`, ms(now.Add(-scheduledKept))); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO scheduled_log (bot, id, user_id, appended) VALUES (?, ?, ?, ?)
		ON CONFLICT (bot, id) DO NOTHING`, bot, sch.ID, sch.User, ms(now))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
