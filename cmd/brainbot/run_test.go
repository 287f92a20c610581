package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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

// holdWriter is a log's stderr that holds back a line with hold in it
// until a line with until has been written, or for at most window: the
// line comes late, as from a goroutine the scheduler runs last.
type holdWriter struct {
	syncBuffer
	hold, until string
	window      time.Duration
	came        chan struct{}
	once        sync.Once
}

func (w *holdWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.hold) {
		select {
		case <-w.came:
		case <-time.After(w.window):
		}
	}
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(string(p), w.until) {
		w.once.Do(func() { close(w.came) })
	}
	return n, err
}

// The admin who stops brainbot reads "stopping" before "brainbot
// stopped", however late the line saying it heard the stop is written:
// run waits for it. (Were run not to wait, "brainbot stopped" would come
// within the window and the lines would be out of order.)
func TestStoppingIsLoggedBeforeStopped(t *testing.T) {
	s := newSite(t, map[string]string{"chat.yaml": brainWith("CHAT_TOKEN", "")}, "CHAT_TOKEN="+chatToken)
	logs := &holdWriter{hold: `"msg":"stopping: `, until: `"msg":"brainbot stopped"`, window: 2 * time.Second, came: make(chan struct{})}
	stop := startRunTo(t, s.env, logs)
	waitForLog(t, &logs.syncBuffer, `"msg":"telegram bot polling"`)
	if code := stop(); code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
	out := logs.String()
	stopping, stopped := strings.Index(out, `"msg":"stopping: `), strings.Index(out, `"msg":"brainbot stopped"`)
	if stopping < 0 || stopped < stopping {
		t.Errorf("the stop is logged out of order (stopping at %d, stopped at %d):\n%s", stopping, stopped, out)
	}
}
