package brain

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// hangGuard bounds every wait; it only fails a test that would hang.
const hangGuard = 10 * time.Second

// watching runs a Watcher on dir for the test and collects its changes.
type watching struct {
	t       *testing.T
	dir     string
	changes chan Change
	// problems gets what the watcher reports of the files with problems.
	problems chan map[string]error
	logs     *observer.ObservedLogs
}

func startWatcher(t *testing.T, dir string) *watching {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	w := &watching{t: t, dir: dir, changes: make(chan Change, 100), problems: make(chan map[string]error, 100), logs: logs}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	watcher := &Watcher{Dir: dir, Log: zap.New(core), Debounce: 20 * time.Millisecond,
		Problems: func(p map[string]error) { w.problems <- p }}
	go func() { done <- watcher.Run(ctx, func(c Change) { w.changes <- c }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancel, want nil", err)
			}
		case <-time.After(hangGuard):
			t.Error("Run did not return after its context ended")
		}
	})
	return w
}

// next waits for the next change.
func (w *watching) next() Change {
	w.t.Helper()
	select {
	case c := <-w.changes:
		return c
	case <-time.After(hangGuard):
		w.t.Fatal("no change reported")
		return Change{}
	}
}

// nextBrain waits for the next change and requires it to be a valid brain
// with the given id and name.
func (w *watching) nextBrain(id, name string) *Brain {
	w.t.Helper()
	c := w.next()
	if c.ID != id || c.Brain == nil || c.Brain.Name != name {
		w.t.Fatalf("change %s %+v, want brain %s named %q", c.ID, c.Brain, id, name)
	}
	return c.Brain
}

// waitForError waits for the Error-level log line about file and returns
// its error text.
func (w *watching) waitForError(file string) observer.LoggedEntry {
	w.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		for _, e := range w.logs.FilterLevelExact(zapcore.ErrorLevel).All() {
			if e.ContextMap()["file"] == file {
				return e
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.t.Fatalf("no error logged for %s; logs: %v", file, w.logs.All())
	return observer.LoggedEntry{}
}

// noPendingChange fails if a change is waiting. Call it only after an event
// that proves the watcher has handled what came before.
func (w *watching) noPendingChange() {
	w.t.Helper()
	select {
	case c := <-w.changes:
		w.t.Fatalf("unexpected change %s %+v", c.ID, c.Brain)
	default:
	}
}

func (w *watching) path(name string) string { return filepath.Join(w.dir, name) }

func (w *watching) write(name, content string) {
	w.t.Helper()
	if err := os.WriteFile(w.path(name), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// saveAtomically saves the way many editors do: a temporary file renamed
// over the old one.
func (w *watching) saveAtomically(name, content string) {
	w.t.Helper()
	tmp := w.path("." + name + ".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.path(name)); err != nil {
		w.t.Fatal(err)
	}
}

func TestWatcherFollowsEdits(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"narrator.yaml": brainWithEnv("Narrator", "NARRATOR_TOKEN")})
	w := startWatcher(t, dir)

	w.nextBrain("narrator", "Narrator") // what was there at the start

	w.write("narrator.yaml", brainWithEnv("Narrator 2", "NARRATOR_TOKEN"))
	w.nextBrain("narrator", "Narrator 2")

	w.saveAtomically("narrator.yaml", brainWithEnv("Narrator 3", "NARRATOR_TOKEN"))
	w.nextBrain("narrator", "Narrator 3")

	// An invalid edit: logged with file:line, and the last good one stays.
	// (Forget earlier lines: an in-place write can be seen half done.)
	w.logs.TakeAll()
	w.saveAtomically("narrator.yaml", "name: Narrator 4\ntelegram:\n  token_env: NARRATOR_TOKEN\ntts:\n  speed: 9\n")
	entry := w.waitForError(w.path("narrator.yaml"))
	wantErr := w.path("narrator.yaml") + ":1: system_prompt: is required (who the bot is and how it answers)\n" +
		w.path("narrator.yaml") + ":5: tts.speed: must be between 0.25 and 4.0, got 9"
	if got := entry.ContextMap()["error"]; got != wantErr {
		t.Errorf("logged error %q, want %q", got, wantErr)
	}
	if got := entry.ContextMap()["bot"]; got != "narrator" {
		t.Errorf("logged bot %q, want narrator", got)
	}
	if !strings.Contains(entry.Message, "keeping the last good version") {
		t.Errorf("log message %q does not say the last good version stays", entry.Message)
	}
	w.noPendingChange()

	// Fixing it applies again.
	w.saveAtomically("narrator.yaml", brainWithEnv("Narrator 5", "NARRATOR_TOKEN"))
	w.nextBrain("narrator", "Narrator 5")
}

func TestWatcherAddsAndRemovesBots(t *testing.T) {
	dir := t.TempDir()
	w := startWatcher(t, dir)

	w.write("voice.yaml", brainWithEnv("Voice", "VOICE_TOKEN"))
	w.nextBrain("voice", "Voice")

	if err := os.Remove(w.path("voice.yaml")); err != nil {
		t.Fatal(err)
	}
	if c := w.next(); c.ID != "voice" || c.Brain != nil {
		t.Fatalf("after delete: change %s %+v, want voice removed", c.ID, c.Brain)
	}

	// Renamed away: the old bot stops, the new id starts.
	w.write("story.yaml", brainWithEnv("Story", "STORY_TOKEN"))
	w.nextBrain("story", "Story")
	if err := os.Rename(w.path("story.yaml"), w.path("tale.yml")); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{} // id → running
	for range 2 {
		c := w.next()
		got[c.ID] = c.Brain != nil
	}
	if len(got) != 2 || got["story"] || !got["tale"] {
		t.Errorf("after rename: %v, want story stopped and tale running", got)
	}
}

func TestWatcherIgnoresTempFilesAndChmod(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"narrator.yaml": brainWithEnv("Narrator", "NARRATOR_TOKEN")})
	w := startWatcher(t, dir)
	w.nextBrain("narrator", "Narrator")

	for _, name := range []string{".#narrator.yaml", "narrator.yaml~", ".narrator.yaml.swp", "narrator.yaml.swp", ".hidden.yaml"} {
		w.write(name, "broken: [\n")
	}
	if err := os.Chmod(w.path("narrator.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The watcher handles events in order: the next change being this new
	// file shows that none of the above produced a change.
	w.write("zeta.yaml", brainWithEnv("Zeta", "ZETA_TOKEN"))
	w.nextBrain("zeta", "Zeta")
	if errs := w.logs.FilterLevelExact(zapcore.ErrorLevel).All(); len(errs) > 0 {
		t.Errorf("ignored files were read: %v", errs)
	}
}

func TestWatcherRejectsConflicts(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"narrator.yaml": brainWithEnv("Narrator", "NARRATOR_TOKEN")})
	w := startWatcher(t, dir)
	w.nextBrain("narrator", "Narrator")

	// Saved in one step: a file the watcher could read half written would
	// log another error first.
	w.saveAtomically("copy.yaml", brainWithEnv("Copy", "NARRATOR_TOKEN"))
	entry := w.waitForError(w.path("copy.yaml"))
	want := w.path("copy.yaml") + ":3: telegram.token_env: NARRATOR_TOKEN is already the token of " +
		w.path("narrator.yaml") + "; Telegram allows one bot per token"
	if got := entry.ContextMap()["error"]; got != want {
		t.Errorf("logged %q, want %q", got, want)
	}

	w.saveAtomically("narrator.yml", brainWithEnv("Narrator yml", "OTHER_TOKEN"))
	entry = w.waitForError(w.path("narrator.yml"))
	want = w.path("narrator.yml") + `:1: bot id "narrator" is already used by ` + w.path("narrator.yaml") + "; keep one of the files"
	if got := entry.ContextMap()["error"]; got != want {
		t.Errorf("logged %q, want %q", got, want)
	}
	w.noPendingChange()

	// With the original gone, the other file of that id takes over.
	if err := os.Remove(w.path("narrator.yaml")); err != nil {
		t.Fatal(err)
	}
	w.nextBrain("narrator", "Narrator yml")
}

// A file refused because another bot holds its token starts once that bot
// is gone: moving a brain to a new name, in one step (mv) or two (cp, then
// rm), keeps the bot running whatever order the events are handled in.
func TestWatcherStartsAFileOnceItsTokenIsFree(t *testing.T) {
	for _, atStart := range []bool{false, true} {
		t.Run(fmt.Sprintf("copy there at start %v", atStart), func(t *testing.T) {
			testWatcherMove(t, atStart)
		})
	}
}

func testWatcherMove(t *testing.T, copyAtStart bool) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"narrator.yaml": brainWithEnv("Narrator", "NARRATOR_TOKEN")})
	if copyAtStart {
		writeFiles(t, dir, map[string]string{"story.yaml": brainWithEnv("Story", "NARRATOR_TOKEN")})
	}
	w := startWatcher(t, dir)
	w.nextBrain("narrator", "Narrator")
	if !copyAtStart {
		w.write("story.yaml", brainWithEnv("Story", "NARRATOR_TOKEN"))
	}
	w.waitForError(w.path("story.yaml"))
	w.noPendingChange()
	if err := os.Remove(w.path("narrator.yaml")); err != nil {
		t.Fatal(err)
	}
	if c := w.next(); c.ID != "narrator" || c.Brain != nil {
		t.Fatalf("after rm: change %s %+v, want narrator removed", c.ID, c.Brain)
	}
	w.nextBrain("story", "Story")

	// "alpha" sorts before "story": handled first, it would meet story's token.
	if err := os.Rename(w.path("story.yaml"), w.path("alpha.yaml")); err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{}
	for !running["alpha"] {
		c := w.next()
		running[c.ID] = c.Brain != nil
	}
	if running["story"] {
		t.Errorf("after mv: %v, want story stopped and alpha running", running)
	}
}

func TestWatcherReportsInvalidFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"good.yaml": brainWithEnv("Good", "GOOD_TOKEN"),
		"bad.yaml":  "name: Bad\n",
	})
	w := startWatcher(t, dir)
	w.nextBrain("good", "Good")
	entry := w.waitForError(w.path("bad.yaml"))
	if got := entry.ContextMap()["bot"]; got != "bad" {
		t.Errorf("logged bot %q, want bad", got)
	}
	if !strings.Contains(entry.Message, "bot not started") {
		t.Errorf("log message %q does not say the bot did not start", entry.Message)
	}

	// The files with problems are reported with their problems as
	// file:line (an admin's status page shows them): at the start, when
	// an edit breaks a file (its last good version running on), and when
	// it is fixed.
	next := func() map[string]error {
		t.Helper()
		select {
		case got := <-w.problems:
			return got
		case <-time.After(hangGuard):
			t.Fatal("no problems reported")
			return nil
		}
	}
	want := func(file, problem string) {
		t.Helper()
		if got := next(); len(got) != 1 || got[w.path(file)] == nil || !strings.Contains(got[w.path(file)].Error(), w.path(file)+":"+problem) {
			t.Fatalf("problems reported %v, want only %s's: %s", got, file, problem)
		}
	}
	want("bad.yaml", "1: system_prompt: is required")

	w.saveAtomically("good.yaml", "name: Good\ntelegram:\n  token_env: GOOD_TOKEN\nsystem_prompt: hi\ntts:\n  speed: 9\n")
	w.waitForError(w.path("good.yaml"))
	if got := next(); len(got) != 2 || !strings.Contains(got[w.path("good.yaml")].Error(), w.path("good.yaml")+":6: tts.speed") {
		t.Fatalf("after a broken edit: %v, want good.yaml:6 as well", got)
	}
	if err := os.Remove(w.path("bad.yaml")); err != nil {
		t.Fatal(err)
	}
	w.saveAtomically("good.yaml", brainWithEnv("Good 2", "GOOD_TOKEN"))
	w.nextBrain("good", "Good 2")
	for len(next()) > 0 { // fixed and removed: none left in the end
	}
}

func TestWatcherMissingDir(t *testing.T) {
	w := &Watcher{Dir: filepath.Join(t.TempDir(), "missing")}
	err := w.Run(context.Background(), func(Change) { t.Error("change from a missing folder") })
	if err == nil {
		t.Fatal("Run on a missing folder returned nil")
	}
}

// TestWatcherStopsCleanly checks that Run leaves no goroutine behind.
func TestWatcherStopsCleanly(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Watcher{Dir: t.TempDir()}).Run(ctx, func(Change) {}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Run did not return after its context ended")
	}
	deadline := time.Now().Add(hangGuard)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A mistake made in the live folder is logged in the words `brainbot
// check` prints for it (LoadFile): a tab, whichever way yaml.v3 words it.
func TestWatcherSaysWhatCheckSays(t *testing.T) {
	dir := t.TempDir()
	w := startWatcher(t, dir)
	for name, content := range map[string]string{
		"tab.yaml":   "name: Tab\ntelegram:\n  token_env: TAB_TOKEN\nsystem_prompt: |\n\tYou are kind.\n",
		"limts.yaml": brainWithEnv("Limits", "LIMITS_TOKEN") + "limts:\n  per_user_per_day: 5\n",
	} {
		w.saveAtomically(name, content)
		logged := w.waitForError(w.path(name)).ContextMap()["error"]
		_, checked := LoadFile(w.path(name))
		if checked == nil || logged != checked.Error() {
			t.Errorf("%s: the live folder logs %q, check says %v", name, logged, checked)
		}
	}
}
