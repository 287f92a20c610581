package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"brainbot/state"
	"brainbot/state/sqlite"
	"brainbot/state/statetest"
)

// The embedded backend passes the conformance suite: one SQLite file in a
// temporary folder; a restart closes the store and opens the file again,
// as a process that stops and starts does.
func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T, dataDir string, _ func(bot, session string) string) (state.Backend, func() state.Backend) {
		path := filepath.Join(dataDir, sqlite.FileName)
		open := func() *sqlite.Store {
			// A delivery handed back comes again within milliseconds.
			s, err := sqlite.Open(context.Background(), path, sqlite.Retries(time.Millisecond, 10*time.Millisecond),
				sqlite.Log(zaptest.NewLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		current := open()
		t.Cleanup(func() { current.Close() })
		restart := func() state.Backend {
			if err := current.Close(); err != nil {
				t.Fatal(err)
			}
			current = open()
			return current
		}
		return current, restart
	})
}
