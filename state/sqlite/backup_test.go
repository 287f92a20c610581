package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
)

// TestBackupWhileWriting backs up through a second connection, as
// `brainbot backup` does beside the running service, while the service
// journals messages. The copy opens, holds what was written before the
// backup started, and is consistent: each message's offset came with it.
func TestBackupWhileWriting(t *testing.T) {
	ctx := context.Background()
	service, path := openTemp(t)
	for i := range int64(50) {
		journalMessage(t, service, i)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := int64(50); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			journalMessage(t, service, i)
		}
	})

	tool, err := OpenExisting(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer tool.Close()
	dest := filepath.Join(t.TempDir(), "backup.db")
	for range 3 { // let the backups overlap many writes
		if err := tool.Backup(ctx, dest); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	info, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("backup file mode %v, want 0600 (it holds users' messages)", perm)
	}
	copied, err := Open(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	entries, err := pendingOf(ctx, copied, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 50 {
		t.Fatalf("backup holds %d journal entries, want at least the 50 written before it", len(entries))
	}
	offset, err := copied.Offset(ctx, "b@1")
	if err != nil {
		t.Fatal(err)
	}
	if last := entries[len(entries)-1].MessageID; offset != int64(last) {
		t.Errorf("backup has offset %d but last message %d: not one transaction's snapshot", offset, last)
	}
}

// journalMessage journals message i and advances the offset to i in one
// transaction.
func journalMessage(t *testing.T, s *Store, i int64) {
	t.Helper()
	e := Entry{Bot: "b", Chat: 1, User: 1, MessageID: int(i), Text: "hello", Created: t0}
	if _, err := s.Journal(context.Background(), e, "b@1", i); err != nil {
		t.Error(err)
	}
}

// A backup to the file of the previous one replaces it, so that a backup
// recipe can run again; it is never the database's own file.
func TestBackupReplacesThePreviousOne(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "brainbot.db")
	if err := os.WriteFile(dest, []byte("an older backup"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The notes personas keep about users are in it too, and the
	// reminders and contacts.
	if _, err := s.AddNote(ctx, "b", 7, "Has a cat named Miso", 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := state.Reminder{Key: message.Key{Bot: "b", Chat: 7}, User: 7, Text: "call mom", Due: time.Now().Add(time.Hour), Created: time.Now()}
	if _, err := s.AddReminder(ctx, r, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTimeZone(ctx, "b", 7, "Europe/Lisbon"); err != nil {
		t.Fatal(err)
	}
	for i := range int64(2) {
		journalMessage(t, s, i)
		if err := s.Backup(ctx, dest); err != nil {
			t.Fatalf("backup %d: %v", i+1, err)
		}
		copied, err := Open(ctx, dest)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := pendingOf(ctx, copied, "b")
		notes, nerr := copied.Notes(ctx, "b", 7)
		reminders, rerr := copied.Reminders(ctx, "b", 7)
		contact, _, cerr := copied.Contact(ctx, "b", 7)
		copied.Close()
		if err != nil || len(entries) != int(i)+1 {
			t.Fatalf("backup %d holds %d entries (%v), want %d", i+1, len(entries), err, i+1)
		}
		if nerr != nil || len(notes) != 1 || notes[0].Text != "Has a cat named Miso" {
			t.Errorf("backup %d holds notes %+v (%v)", i+1, notes, nerr)
		}
		if rerr != nil || cerr != nil || len(reminders) != 1 || reminders[0].Text != "call mom" || contact.Zone != "Europe/Lisbon" {
			t.Errorf("backup %d holds reminders %+v (%v), contact %+v (%v)", i+1, reminders, rerr, contact, cerr)
		}
	}
	if info, err := os.Stat(dest); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("backup file: %v, %v; want mode 0600 (it holds users' messages)", info, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	for _, own := range []string{path, path + "-wal", filepath.Join(filepath.Dir(path), ".", filepath.Base(path))} {
		if err := s.Backup(ctx, own); err == nil || !strings.Contains(err.Error(), "is the database's own file") {
			t.Errorf("Backup(%s) = %v, want a refusal", own, err)
		}
	}
	if _, err := pendingOf(ctx, s, "b"); err != nil {
		t.Errorf("the database after the refusals: %v", err)
	}
}

// A failed backup leaves nothing behind, and the previous backup as it was.
func TestBackupFailureLeavesNoFile(t *testing.T) {
	s, _ := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	dest := filepath.Join(dir, "b.db")
	if err := s.Backup(ctx, dest); err == nil {
		t.Fatal("Backup with a cancelled context succeeded")
	}
	if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("failed backup left %s: %v", dest, err)
	}
	if err := os.WriteFile(dest, []byte("the previous backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(ctx, dest); err == nil {
		t.Fatal("Backup with a cancelled context succeeded")
	}
	if b, _ := os.ReadFile(dest); string(b) != "the previous backup" {
		t.Errorf("a failed backup changed the previous one to %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left beside the backup: %v", entries)
	}
}

func TestOpenExistingNeitherCreatesNorMigrates(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), FileName)
	if s, err := OpenExisting(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("OpenExisting of a missing database = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenExisting created %s: %v", missing, err)
	}

	path := fromFixture(t, 1)
	s, err := OpenExisting(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got, want := schemaOf(t, path), schemaAt(t, 1); got != want {
		t.Fatalf("OpenExisting changed the schema:\n%s", got)
	}
}
