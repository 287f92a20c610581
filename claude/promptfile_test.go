package claude

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
)

// A prompt file is written for its first CLI, 0600, shared by the CLIs of
// the same prompt, written afresh when a stale copy is there, and removed
// after its last CLI; another prompt has a file of its own.
func TestPromptFiles(t *testing.T) {
	home := t.TempDir()
	stale := promptFile(home, "Be kind.")
	if err := os.WriteFile(stale, []byte("Be cruel."), 0o644); err != nil {
		t.Fatal(err)
	}
	var f promptFiles
	a, err := f.acquire(home, "Be kind.")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.acquire(home, "Be kind.")
	other, _ := f.acquire(home, "Be brief.")
	if a != stale || b != a || other == a || filepath.Dir(other) != home {
		t.Fatalf("files %s, %s, %s: want one per prompt in %s", a, b, other, home)
	}
	wantPromptFile(t, a, "Be kind.")
	f.release(a)
	wantPromptFile(t, a, "Be kind.") // b still uses it
	f.release(b)
	f.release(other)
	if left, _ := filepath.Glob(filepath.Join(home, "*")); len(left) != 0 {
		t.Errorf("left once no CLI uses them: %v", left)
	}
}

// The prompt files of an earlier brainbot go before the bot's first CLI.
func TestPromptFilesOfAnEarlierRunGo(t *testing.T) {
	d := &Driver{cfg: Config{DataDir: t.TempDir()}, log: zap.NewNop()}
	d.prepared.bots = map[string]bool{}
	home := d.dirs("b").home
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	left := promptFile(home, "old")
	if err := os.WriteFile(left, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.prepareBot("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", left, err)
	}
}
