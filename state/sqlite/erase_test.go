package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A reader on an older snapshot (brainbot backup, an admin's sqlite3
// inside a transaction) keeps a forget from emptying the write-ahead log,
// whose frames hold the user's words: the store empties it once the
// reader lets go.
func TestForgetEmptiesTheLogOnceTheReaderLetsGo(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zap.InfoLevel)
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(ctx, path, BusyTimeout(50*time.Millisecond), Retries(time.Millisecond, 20*time.Millisecond), Log(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const secret = "Zanzibar quokka sonata 4471"
	env := envelope(1)
	env.Raw = []byte(`{"update_id":1,"message":{"message_id":1,"date":1764200000,"chat":{"id":7,"type":"private"},` +
		`"from":{"id":7,"is_bot":false,"first_name":"Annabel"},"text":"` + secret + `"}}`)
	if err := s.Append(ctx, "b@1001", env); err != nil {
		t.Fatal(err)
	}
	release := readSnapshot(t, path)
	if _, err := s.ForgetUser(ctx, "b", 7); err != nil {
		t.Fatal(err)
	}
	if !fileHolds(t, path+"-wal", secret) {
		t.Fatal("the log was emptied under the reader: this test shows nothing")
	}
	release()
	deadline := time.Now().Add(time.Minute)
	for logs.FilterMessage("database's write-ahead log emptied after retrying").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the log was never emptied: %v", logs.All())
		}
		time.Sleep(time.Millisecond)
	}
	for _, f := range []string{path, path + "-wal"} {
		if fileHolds(t, f, secret) {
			t.Errorf("%s holds the forgotten words", filepath.Base(f))
		}
	}
}

// readSnapshot reads the database at path in a transaction of another
// connection, which keeps its snapshot until release is called.
func readSnapshot(t *testing.T, path string) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM journal`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return func() {
		tx.Rollback()
		db.Close()
	}
}

func fileHolds(t *testing.T, path, words string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Contains(data, []byte(words))
}

// Releases before secure_delete left what they deleted in the database's
// free space: every journal entry answered, with the user's words. The
// upgrade erases it once.
func TestUpgradeErasesWhatEarlierReleasesDeleted(t *testing.T) {
	const secret = "Zanzibar quokka sonata 4471"
	path := filepath.Join(t.TempDir(), FileName)
	withDB(t, path, func(db *sql.DB) {
		if err := migrate(context.Background(), db, secureDeleteSince-1); err != nil {
			t.Fatal(err)
		}
		for _, stmt := range []string{
			`INSERT INTO journal (bot, chat_id, user_id, message_id, text, created, raw) VALUES ('b', 7, 7, 1, '', 0, '` + secret + `')`,
			`DELETE FROM journal`,
		} {
			if _, err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
	})
	if !fileHolds(t, path, secret) {
		t.Fatal("the old release's database does not hold what it deleted: this test shows nothing")
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range []string{path, path + "-wal"} {
		if fileHolds(t, f, secret) {
			t.Errorf("after the upgrade %s holds what release %d deleted", filepath.Base(f), secureDeleteSince-1)
		}
	}
}
