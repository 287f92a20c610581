package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"brainbot/bot/store"
)

func TestBackupCommand(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	db, err := store.Open(ctx, filepath.Join(data, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close() // open, as under a running service
	if err := db.UseSession(ctx, store.Conversation{Bot: "narrator", Chat: 1001}, "6f1c2a7e-3b9d-4c51-9e0a-2d8f7b6c5a41", time.Now()); err != nil {
		t.Fatal(err)
	}

	dest := filepath.Join(t.TempDir(), "brainbot-backup.db")
	code, stdout, stderr := runMain(t, []string{"BRAINBOT_DATA=/nonexistent"}, "backup", "-data", data, dest)
	if code != exitOK || !strings.Contains(stdout, dest) {
		t.Fatalf("backup = %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	copied, err := store.Open(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	if s, ok, err := copied.Session(ctx, store.Conversation{Bot: "narrator", Chat: 1001}); !ok || err != nil || s.ID != "6f1c2a7e-3b9d-4c51-9e0a-2d8f7b6c5a41" {
		t.Fatalf("backup's session = %+v, %v, %v", s, ok, err)
	}

	// The same file again: refused, and the backup is left as it was.
	before, _ := os.ReadFile(dest)
	code, _, stderr = runMain(t, []string{"BRAINBOT_DATA=" + data}, "backup", dest)
	if after, _ := os.ReadFile(dest); code != exitError || !strings.Contains(stderr, "exists") || string(after) != string(before) {
		t.Errorf("backup over an existing file = %d, %q", code, stderr)
	}
}

func TestBackupCommandErrors(t *testing.T) {
	empty := t.TempDir()
	code, _, stderr := runMain(t, []string{"BRAINBOT_DATA=" + empty}, "backup", filepath.Join(t.TempDir(), "b.db"))
	if code != exitError || !strings.Contains(stderr, "BRAINBOT_DATA") || !strings.Contains(stderr, empty) {
		t.Errorf("backup without a database = %d, %q; want the variable and the path named", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(empty, store.FileName)); err == nil {
		t.Error("backup created a database in the data folder")
	}
	if code, _, _ := runMain(t, nil, "backup"); code != exitUsage {
		t.Errorf("backup without FILE = %d, want %d", code, exitUsage)
	}
}
