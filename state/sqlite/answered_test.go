package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"brainbot/state/sqlite/sqlitetest"
)

// A journal entry answered while another connection holds the database's
// write lock past the busy timeout (an admin's sqlite3 shell with a
// transaction open) is kept as answered in a file beside the database:
// Pending leaves it out, so a replay does not answer it again. A later
// Done that lands forgets it; what is still kept at the next Open is
// deleted then.
func TestDoneUnderALongLockKeepsTheAnswer(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(ctx, path, BusyTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	var ids []int64
	for i, text := range []string{"retried", "left for the next start", "unanswered"} {
		id, err := s.Journal(ctx, Entry{Bot: "b", Chat: 1, User: 1, MessageID: i, Text: text, Created: t0}, "b@1", int64(100+i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	kept := path + "-answered"

	unlock := sqlitetest.LockWrites(t, path)
	for _, id := range ids[:2] {
		err := s.Done(ctx, id)
		if err == nil || !strings.Contains(err.Error(), "kept as answered") {
			t.Fatalf("Done under the lock = %v, want an error saying the answer was kept", err)
		}
	}
	pendingAre(t, s, ids[2])
	unlock()

	if err := s.Done(ctx, ids[0]); err != nil {
		t.Fatalf("Done after the lock: %v", err)
	}
	pendingAre(t, s, ids[2])
	if data, err := os.ReadFile(kept); err != nil || !strings.Contains(string(data), strconv.FormatInt(ids[1], 10)) {
		t.Fatalf("%s = %q, %v; want the entry still kept", kept, data, err)
	}

	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	pendingAre(t, s, ids[2])
	if _, err := os.Stat(kept); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after Open: %v, want it gone", kept, err)
	}
	var rows int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM journal`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("journal rows after Open = %d, %v; want 1", rows, err)
	}
}

func pendingAre(t *testing.T, s *Store, want ...int64) {
	t.Helper()
	got, err := pendingOf(context.Background(), s, "b")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("pending %v, want %v", ids, want)
	}
}
