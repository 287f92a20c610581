// Package sqlite is the embedded backend of brainbot's state (package
// state), for one process: everything in one SQLite file (modernc.org/sqlite,
// no cgo): each (bot, user)'s Claude session and the sessions it replaced,
// voice-reply toggles, daily message counters, and the in-flight journal that
// lets a restarted process finish what a crashed one had accepted. Beside the
// database, only while another process has held it locked, a small file lists
// the answered journal entries not yet deleted (see Done).
//
// All times are stored as UTC Unix milliseconds. The schema is migrated in
// code (see migrations) when the database is opened.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"brainbot/bot/message"
	"brainbot/state"
)

// FileName is the database's name inside the data directory.
const FileName = "brainbot.db"

// Store is safe for concurrent use.
type Store struct {
	db *sql.DB
	// path is the database file.
	path string
	// answered are the journal entries answered but not yet deleted (see
	// Done).
	answered *answered
	// runs are the panel runs this process runs.
	runs runsHere
	// journal is the log of updates (Append, Consume).
	journal *Journal
	// background is the work the store does on its own (clears retried),
	// until Close.
	background sync.WaitGroup
	closing    context.Context
	close      context.CancelFunc
}

// Option changes how Open opens the database.
type Option func(*options)

type options struct {
	busyTimeout        time.Duration
	retryMin, retryMax time.Duration
	log                *zap.Logger
}

func defaultOptions() options {
	return options{busyTimeout: 10 * time.Second, retryMin: time.Second, retryMax: 5 * time.Minute, log: zap.NewNop()}
}

// BusyTimeout is how long a statement waits for a lock another connection
// holds before it fails (default 10s).
func BusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

// Retries bounds the waits between the retries of a journal entry's
// clearing the database refused, and before a delivery handed back is
// handed out again (default 1s to 5m).
func Retries(min, max time.Duration) Option {
	return func(o *options) { o.retryMin, o.retryMax = min, max }
}

// Log is where the store reports what it retries (default nowhere).
func Log(log *zap.Logger) Option {
	return func(o *options) { o.log = log }
}

// Open opens (creating if needed) the database at path, brings its schema
// up to date (see migrations) and deletes the journal entries an earlier
// process kept as answered (see Done).
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	s, err := open(path, "rwc", o)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, s.db, len(migrations)); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	if s.answered, err = loadAnswered(path + answeredSuffix); err != nil {
		s.db.Close()
		return nil, err
	}
	s.deleteAnswered(ctx)
	return s, nil
}

// answeredSuffix names the file of the answered entries beside the
// database (see answered).
const answeredSuffix = "-answered"

// OpenExisting opens the database at path, which must exist, and leaves
// its schema as it is. It is for tools that run beside the service, such
// as `brainbot backup`: their binary may be older or newer than the
// service's, and upgrading a database under a running service would pull
// the schema from under it.
func OpenExisting(ctx context.Context, path string) (*Store, error) {
	// SQLite's own error for a missing file does not say which; this one
	// does, and wraps fs.ErrNotExist.
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	s, err := open(path, "rw", defaultOptions())
	if err != nil {
		return nil, err
	}
	// sql.Open connects lazily: connect now, so that a missing file is
	// reported here and not by the first query.
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Read, never applied: deleting them is the service's.
	if s.answered, err = loadAnswered(path + answeredSuffix); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// open prepares the connection pool; mode is SQLite's URI mode: "rwc"
// creates a missing file, "rw" does not.
func open(path, mode string, o options) (*Store, error) {
	q := url.Values{}
	q.Set("mode", mode)
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// NORMAL in WAL mode survives a process crash (kill -9); only a power
	// loss can drop the last commits.
	q.Add("_pragma", "synchronous(NORMAL)")
	// Writers take the lock up front, so two concurrent read-then-write
	// transactions wait for each other instead of failing with SQLITE_BUSY.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	s.closing, s.close = context.WithCancel(context.Background())
	s.journal = newJournal(s, o)
	return s, nil
}

// Close ends the store's own work (a clear still retried is given up: the
// next start finishes it) and closes the database.
func (s *Store) Close() error {
	s.close()
	s.background.Wait()
	return s.db.Close()
}

// launch runs fn as the store's own work, until Close.
func (s *Store) launch(fn func(ctx context.Context)) {
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		fn(s.closing)
	}()
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// withTx runs fn in a write transaction and commits it if fn succeeds.
func (s *Store) withTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// ---- sessions ----

// RecentSessions lists the current sessions used at since or later, the
// most recently used first, at most limit: the conversations whose next
// message is likeliest soon.
func (s *Store) RecentSessions(ctx context.Context, since time.Time, limit int) ([]state.RecentSession, error) {
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
func (s *Store) Session(ctx context.Context, c message.Key) (sess state.Session, ok bool, err error) {
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
func (s *Store) UseSession(ctx context.Context, c message.Key, id string, now time.Time) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
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
func (s *Store) ResetSession(ctx context.Context, c message.Key, now time.Time) (ended string, err error) {
	err = s.withTx(ctx, func(tx *sql.Tx) error {
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
func (s *Store) SessionHistory(ctx context.Context, c message.Key) ([]state.PastSession, error) {
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

// ---- voice toggles ----

// Voice reports the user's voice-reply choice; set is false if the user
// never chose (the brain's default applies).
func (s *Store) Voice(ctx context.Context, bot string, user int64) (on, set bool, err error) {
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
func (s *Store) SetVoice(ctx context.Context, bot string, user int64, on bool) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO voice (bot, user_id, on_) VALUES (?, ?, ?)
		 ON CONFLICT (bot, user_id) DO UPDATE SET on_ = excluded.on_`, bot, user, on)
	if err != nil {
		return fmt.Errorf("save voice toggle: %w", err)
	}
	return nil
}

// ---- daily limits ----

// day is the UTC calendar day of t; counters reset at UTC midnight.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// TakeDaily counts one message for the user today, unless limit (> 0) is
// already reached; then ok is false and nothing is counted. resetAt is when
// today's count resets. A limit <= 0 means unlimited (still counted).
func (s *Store) TakeDaily(ctx context.Context, bot string, user int64, limit int, now time.Time) (ok bool, resetAt time.Time, err error) {
	resetAt = state.NextReset(now)
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		var count int
		err := tx.QueryRowContext(ctx, `SELECT count FROM daily WHERE bot = ? AND user_id = ? AND day = ?`,
			bot, user, day(now)).Scan(&count)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if limit > 0 && count >= limit {
			return nil
		}
		ok = true
		_, err = tx.ExecContext(ctx,
			`INSERT INTO daily (bot, user_id, day, count) VALUES (?, ?, ?, 1)
			 ON CONFLICT (bot, user_id, day) DO UPDATE SET count = count + 1`,
			bot, user, day(now))
		return err
	})
	if err != nil {
		return false, resetAt, fmt.Errorf("count daily message: %w", err)
	}
	return ok, resetAt, nil
}

// DailyCount is how many messages the user sent on now's UTC day.
func (s *Store) DailyCount(ctx context.Context, bot string, user int64, now time.Time) (int, error) {
	var count int
	err := s.db.QueryRowContext(ctx, `SELECT count FROM daily WHERE bot = ? AND user_id = ? AND day = ?`,
		bot, user, day(now)).Scan(&count)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read daily count: %w", err)
	}
	return count, nil
}

// ---- in-flight journal ----

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
}

// Journal records an update before any work on it starts and, in the
// same transaction, advances poller's handled update offset to updateID
// (never back): after a crash the update is either in the journal or will
// be delivered again by Telegram, never both and never neither.
func (s *Store) Journal(ctx context.Context, e Entry, poller string, updateID int64) (int64, error) {
	var id int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`INSERT INTO journal (bot, chat_id, thread_id, chat_type, user_id, sender, message_id, text, media, mode, attempts, created,
			 update_id, raw, me_id, me_username)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)`,
			e.Bot, e.Chat, e.Thread, cmp.Or(e.ChatType, "private"), e.User, e.Sender, e.MessageID, e.Text, e.Media, e.Mode, ms(e.Created),
			e.UpdateID, e.Update, e.MeID, e.MeUsername)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
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
func (s *Store) Offset(ctx context.Context, poller string) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT update_id FROM offsets WHERE poller = ?`, poller).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read update offset: %w", err)
	}
	return id, nil
}

// Charged records that the entry was counted against its user's daily
// limit and will be answered in mode: a replay must not count it again.
func (s *Store) Charged(ctx context.Context, id int64, mode string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE journal SET mode = ? WHERE id = ?`, mode, id); err != nil {
		return fmt.Errorf("journal charge: %w", err)
	}
	return nil
}

// Attempt records that work on the entry starts now, with the chosen mode.
func (s *Store) Attempt(ctx context.Context, id int64, mode string) error {
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
func (s *Store) Done(ctx context.Context, id int64) error {
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
func (s *Store) deleteAnswered(ctx context.Context) {
	ids := s.answered.list()
	if len(ids) == 0 {
		return
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
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
func (s *Store) Pending(ctx context.Context) ([]Entry, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, bot, chat_id, thread_id, chat_type, user_id, sender, message_id, text, media, mode, attempts, created,
		 update_id, raw, me_id, me_username
		 FROM journal ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var created int64
		if err := rows.Scan(&e.ID, &e.Bot, &e.Chat, &e.Thread, &e.ChatType, &e.User, &e.Sender, &e.MessageID, &e.Text, &e.Media, &e.Mode, &e.Attempts, &created,
			&e.UpdateID, &e.Update, &e.MeID, &e.MeUsername); err != nil {
			return nil, fmt.Errorf("read journal: %w", err)
		}
		e.Created = fromMS(created)
		if !s.answered.has(e.ID) {
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	return out, nil
}
