// Package storetest helps the tests of the store and of its users meet a
// database they do not own alone.
package sqlitetest

import (
	"context"
	"database/sql"
	"testing"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// LockWrites holds the write lock of the SQLite database at path from
// another connection, as an admin's sqlite3 shell inside a transaction
// does, until the returned func is called. Readers go on; writers wait
// for their busy timeout, then fail.
func LockWrites(t testing.TB, path string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	// It waits for a write of brainbot's under way, as a shell would be
	// made to: without a busy timeout BEGIN IMMEDIATE fails at once when
	// the lock is taken in the instant brainbot journals a message.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Error(err)
		}
		conn.Close()
		db.Close()
	}
}
