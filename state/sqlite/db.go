package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"go.uber.org/zap"
)

// db is what every part of the store shares: the database, and the work
// the store does on its own (clears and hand-backs retried) until Close.
type db struct {
	*sql.DB
	// path is the database file.
	path        string
	busyTimeout time.Duration
	retry       backoff
	log         *zap.Logger

	background sync.WaitGroup
	closing    context.Context
	close      context.CancelFunc
}

// open prepares the connection pool; mode is SQLite's URI mode: "rwc"
// creates a missing file, "rw" does not.
func open(path, mode string, o options) (*db, error) {
	q := url.Values{}
	q.Set("mode", mode)
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// NORMAL in WAL mode survives a process crash (kill -9); only a power
	// loss can drop the last commits.
	q.Add("_pragma", "synchronous(NORMAL)")
	// What a statement deletes is overwritten with zeros, not left in the
	// page's free space or on a free page, where grep finds it (a
	// forgotten user's words in the journal's raw updates). The old page
	// images the write-ahead log still holds go with truncateWAL.
	q.Add("_pragma", "secure_delete(ON)")
	// Writers take the lock up front, so two concurrent read-then-write
	// transactions wait for each other instead of failing with SQLITE_BUSY.
	q.Set("_txlock", "immediate")
	pool, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d := &db{DB: pool, path: path, busyTimeout: o.busyTimeout, retry: backoff{min: o.retryMin, max: o.retryMax}, log: o.log}
	d.closing, d.close = context.WithCancel(context.Background())
	return d, nil
}

// shutdown ends the store's own work, empties the write-ahead log and
// closes the database.
func (d *db) shutdown() error {
	d.close()
	d.background.Wait()
	// The last connection to close empties the log too, but not while
	// another process (brainbot backup, an admin's sqlite3) has the
	// database open.
	ctx, cancel := context.WithTimeout(context.Background(), 2*d.busyTimeout)
	defer cancel()
	if err := d.truncateWAL(ctx); err != nil {
		d.log.Warn("could not empty the database's write-ahead log at close; the next checkpoint does", zap.Error(err))
	}
	return d.DB.Close()
}

// truncateWAL copies the write-ahead log into the database and truncates
// it to nothing. Until then its frames, the pages as they were before
// each write, keep what was deleted since the log last started over.
func (d *db) truncateWAL(ctx context.Context) error {
	var busy, frames, copied int
	if err := d.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if busy != 0 {
		// A reader held an older snapshot past the busy timeout.
		return errors.New("checkpoint: the write-ahead log is still read")
	}
	return nil
}

// eraseDeleted empties the write-ahead log now (truncateWAL), and if it
// cannot, retries in the background, with backoff, until it has or the
// store closes (which empties it too).
func (d *db) eraseDeleted(ctx context.Context) {
	err := d.truncateWAL(ctx)
	if err == nil {
		return
	}
	d.log.Warn("could not empty the database's write-ahead log after a forget; retrying", zap.Error(err))
	d.launch(func(ctx context.Context) {
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return // shutdown empties it
			case <-time.After(d.retry.wait(n)):
			}
			if err := d.truncateWAL(ctx); err == nil {
				d.log.Info("database's write-ahead log emptied after retrying")
				return
			}
		}
	})
}

// launch runs fn as the store's own work, until Close.
func (d *db) launch(fn func(ctx context.Context)) {
	d.background.Add(1)
	go func() {
		defer d.background.Done()
		fn(d.closing)
	}()
}

// withTx runs fn in a write transaction and commits it if fn succeeds.
func (d *db) withTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// backoff bounds the waits between retries: each doubles the one before.
type backoff struct{ min, max time.Duration }

// wait is the wait before retry n (0 first).
func (b backoff) wait(n int) time.Duration { return min(b.min<<min(n, 16), b.max) }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }
