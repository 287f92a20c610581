package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state/sqlite"
)

func TestBackupCommand(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close() // open, as under a running service
	first := message.Key{Bot: "narrator", Chat: 1001}
	if err := db.UseSession(ctx, first, "6f1c2a7e-3b9d-4c51-9e0a-2d8f7b6c5a41", time.Now()); err != nil {
		t.Fatal(err)
	}

	dest := filepath.Join(t.TempDir(), "brainbot-backup.db")
	code, stdout, stderr := runMain(t, []string{"BRAINBOT_DATA=/nonexistent"}, "backup", "-data", data, dest)
	if code != exitOK || !strings.Contains(stdout, dest) {
		t.Fatalf("backup = %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !backupHolds(t, dest, first) {
		t.Fatal("the backup lacks the session")
	}

	// The same file again, as a nightly job does: replaced by the new copy.
	second := message.Key{Bot: "narrator", Chat: 1002}
	if err := db.UseSession(ctx, second, "0b6f0e1c-95a4-4c1e-8d52-7e3f9a1b2c3d", time.Now()); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runMain(t, []string{"BRAINBOT_DATA=" + data}, "backup", dest)
	if code != exitOK || !backupHolds(t, dest, second) {
		t.Errorf("second backup = %d (%s): want it to hold what was written since the first", code, stderr)
	}

	// Never over the database itself.
	code, _, stderr = runMain(t, []string{"BRAINBOT_DATA=" + data}, "backup", filepath.Join(data, sqlite.FileName))
	if code != exitError || !strings.Contains(stderr, "is the database's own file") {
		t.Errorf("backup over the database = %d, %q", code, stderr)
	}
}

// backupHolds reports whether the backup at path has a session for c.
func backupHolds(t *testing.T, path string, c message.Key) bool {
	t.Helper()
	copied, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	_, ok, err := copied.Session(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestBackupCommandErrors(t *testing.T) {
	empty := t.TempDir()
	code, _, stderr := runMain(t, []string{"BRAINBOT_DATA=" + empty}, "backup", filepath.Join(t.TempDir(), "b.db"))
	if code != exitError || !strings.Contains(stderr, "BRAINBOT_DATA") || !strings.Contains(stderr, empty) {
		t.Errorf("backup without a database = %d, %q; want the variable and the path named", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(empty, sqlite.FileName)); err == nil {
		t.Error("backup created a database in the data folder")
	}
	if code, _, _ := runMain(t, nil, "backup"); code != exitUsage {
		t.Errorf("backup without FILE = %d, want %d", code, exitUsage)
	}
}
