// Package sqlite is the embedded backend of brainbot's state (package
// state), for one process: everything in one SQLite file (modernc.org/sqlite,
// no cgo): each conversation's Claude session and the sessions it replaced,
// voice-reply toggles, daily message counters, what requests cost, what
// buttons mean, panel runs, which brain has each Telegram bot, the notes
// personas keep about users (Memories), the reminders users asked for
// and what check-ins go by (Schedules), and the
// in-flight journal that lets a restarted process finish what a crashed one
// had accepted. Beside the database, only while another process has held it
// locked, a small file lists the answered journal entries not yet deleted
// (see Entries.Done).
//
// Store, which Open returns, is the backend; it is made of one part per
// thing it keeps (Sessions, Voices, Counters, Spending, ButtonSets, Panels,
// Holders, Entries and the Deliveries that hand them to the intake,
// Maintenance), each over the one database. It grants every lease at once
// and leaves the CLI's transcripts where the CLI writes them.
//
// All times are stored as UTC Unix milliseconds. The schema is migrated in
// code (see migrations) when the database is opened.
package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"go.uber.org/zap"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"brainbot/state"
)

// FileName is the database's name inside the data directory.
const FileName = "brainbot.db"

// Store is the backend: one part per thing it keeps, each over the one
// database. It is safe for concurrent use.
type Store struct {
	*Sessions
	*Voices
	*Counters
	*Spending
	*ButtonSets
	*Panels
	*Holders
	*Entries
	*Deliveries
	Leases
	Transcripts
	*Maintenance
	*UserData
	*Memories
	*Schedules

	db *db
}

var _ state.Backend = (*Store)(nil)

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
// process kept as answered (see Entries.Done).
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := createPrivate(path); err != nil {
		return nil, err
	}
	d, err := open(path, "rwc", o)
	if err != nil {
		return nil, err
	}
	if err := eraseOldDeletes(ctx, d); err != nil {
		d.DB.Close()
		return nil, fmt.Errorf("upgrade %s: %w", path, err)
	}
	if err := migrate(ctx, d.DB, len(migrations)); err != nil {
		d.DB.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	a, err := loadAnswered(path + answeredSuffix)
	if err != nil {
		d.DB.Close()
		return nil, err
	}
	s := newStore(d, a)
	s.deleteAnswered(ctx)
	return s, nil
}

// createPrivate creates the database's file, empty (a new database to
// SQLite), unless it is there, readable by its owner alone: SQLite would
// create it 0644 less the umask, and gives its -wal and -shm the
// database's mode. What users said is in them; backups are 0600 too.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create the database: %w", err)
	}
	return f.Close()
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
	d, err := open(path, "rw", defaultOptions())
	if err != nil {
		return nil, err
	}
	// sql.Open connects lazily: connect now, so that a missing file is
	// reported here and not by the first query.
	if err := d.PingContext(ctx); err != nil {
		d.DB.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Read, never applied: deleting them is the service's.
	a, err := loadAnswered(path + answeredSuffix)
	if err != nil {
		d.DB.Close()
		return nil, err
	}
	return newStore(d, a), nil
}

// newStore makes the store's parts over d; a are the entries kept as
// answered.
func newStore(d *db, a *answered) *Store {
	entries := &Entries{db: d, answered: a}
	return &Store{
		Sessions: &Sessions{db: d}, Voices: &Voices{db: d}, Counters: &Counters{db: d}, Spending: &Spending{db: d},
		ButtonSets: &ButtonSets{db: d}, Panels: &Panels{db: d}, Holders: &Holders{db: d},
		Entries: entries, Deliveries: &Deliveries{entries: entries}, Maintenance: &Maintenance{db: d},
		UserData: &UserData{db: d}, Memories: &Memories{db: d}, Schedules: &Schedules{db: d}, db: d,
	}
}

// Close ends the store's own work (a clear still retried is given up: the
// next start finishes it; no delivery is handed over any more) and closes
// the database.
func (s *Store) Close() error { return s.db.shutdown() }
