package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/output"
)

// Retention removes old organised files of the kinds that have a limit
// and says so in the log; a kind without limits is left alone.
func TestPruneOutputs(t *testing.T) {
	data := t.TempDir()
	write := func(kind output.Kind, name string, age time.Duration) string {
		dir := filepath.Join(data, kind.Dir(), "bot-narrator", "user-1")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("x"), 0o640); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
		return path
	}
	oldVoice := write(output.Audio, "bot-narrator-user-1-1-2.mp3", 48*time.Hour)
	newVoice := write(output.Audio, "bot-narrator-user-1-3-4.mp3", time.Minute)
	oldImage := write(output.Image, "bot-narrator-user-1-1-2.png", 48*time.Hour)

	core, logs := observer.New(zap.InfoLevel)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one pass, then return
	pruneOutputs(ctx, data, map[output.Kind]output.Retention{
		output.Audio: {MaxAge: 24 * time.Hour},
		output.Image: {},
	}, time.Hour, zap.New(core))

	for path, want := range map[string]bool{oldVoice: false, newVoice: true, oldImage: true} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s: exists = %v, want %v", filepath.Base(path), err == nil, want)
		}
	}
	if got := logs.FilterMessage("pruned old files").FilterField(zap.Int("removed", 1)).Len(); got != 1 {
		t.Errorf("want one log line saying one file was pruned, got %v", logs.All())
	}
}

// Pruning is owned by run: once stopped, no pass is under way or to come.
func TestPruningEndsWhenStopped(t *testing.T) {
	stop := startPruning(context.Background(), t.TempDir(), map[output.Kind]output.Retention{
		output.Audio: {MaxAge: 24 * time.Hour},
	}, time.Hour, zap.NewNop())
	stop()
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "brainbot.pruneOutputs(") {
		t.Errorf("pruning still runs after it was stopped:\n%s", stacks)
	}
}
