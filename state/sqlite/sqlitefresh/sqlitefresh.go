// Package sqlitefresh opens new embedded backends for the unit tests of
// the state's consumers, quickly: the database is created and migrated
// once per test binary and copied for each test. Migrating is most of
// what a new store costs (a fifth of a second under -race, twenty times
// what opening a copy does), and a kit per test would pay it each time.
package sqlitefresh

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"brainbot/state/sqlite"
)

// migrated is a new database with the current schema, as its file.
var migrated = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "sqlitefresh-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, sqlite.FileName)
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	// The last connection closed leaves every write in the file itself.
	if err := st.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// Open opens the store at path, first a new one unless a database is
// there already (a test's second process), and closes it when the test
// ends.
func Open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		data, err := migrated()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
