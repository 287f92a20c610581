package sqlite

import (
	"context"
	"database/sql"
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
	path  string
	retry backoff
	log   *zap.Logger

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
	// Writers take the lock up front, so two concurrent read-then-write
	// transactions wait for each other instead of failing with SQLITE_BUSY.
	q.Set("_txlock", "immediate")
	pool, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d := &db{DB: pool, path: path, retry: backoff{min: o.retryMin, max: o.retryMax}, log: o.log}
	d.closing, d.close = context.WithCancel(context.Background())
	return d, nil
}

// shutdown ends the store's own work and closes the database.
func (d *db) shutdown() error {
	d.close()
	d.background.Wait()
	return d.DB.Close()
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
