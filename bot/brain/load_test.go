package brain

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFiles creates name → content files in dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func brainWithEnv(name, env string) string {
	return "name: " + name + "\ntelegram:\n  token_env: " + env + "\nsystem_prompt: Be " + name + ".\n"
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	const broken = "name: [\n"
	writeFiles(t, dir, map[string]string{
		"zeta.yaml":  brainWithEnv("Zeta", "ZETA_TOKEN"),
		"alpha.yml":  brainWithEnv("Alpha", "ALPHA_TOKEN"),
		"alpha.yaml": brainWithEnv("Alpha again", "ALPHA2_TOKEN"),
		"zulu.yaml":  brainWithEnv("Zulu", "ZETA_TOKEN"),
		"nope.yaml":  "name: Nope\ntelegram:\n  token_env: NOPE_TOKEN\n",
		"one.yaml":   "name: One\ntelegram:\n  token: \"" + secretToken + "\"\nsystem_prompt: p\n",
		"two.yaml":   "name: Two\ntelegram:\n  token: \"" + secretToken + "\"\nsystem_prompt: p\n",
		// Not brain files: never read.
		".hidden.yaml":      broken,
		".#zeta.yaml":       broken,
		"zeta.yaml~":        broken,
		".zeta.yaml.swp":    broken,
		"zeta.yaml.swp":     broken,
		"notes.txt":         broken,
		"sub/inner.yaml":    broken,
		"folder.yaml/x.txt": broken,
	})

	brains, err := LoadDir(dir)

	var ids []string
	for _, b := range brains {
		ids = append(ids, b.ID)
	}
	if want := []string{"alpha", "one", "zeta"}; !slices.Equal(ids, want) {
		t.Errorf("valid brains %q, want %q", ids, want)
	}
	if brains[0].Path != filepath.Join(dir, "alpha.yaml") {
		t.Errorf("alpha came from %s, want alpha.yaml (the first by name)", brains[0].Path)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	want := []string{
		p("alpha.yml") + `:1: bot id "alpha" is already used by ` + p("alpha.yaml") + "; keep one of the files",
		p("nope.yaml") + ":1: system_prompt: is required (who the bot is and how it answers)",
		p("two.yaml") + ":3: telegram.token: the same token is already used by " + p("one.yaml") + "; Telegram allows one bot per token",
		p("zulu.yaml") + ":3: telegram.token_env: ZETA_TOKEN is already the token of " + p("zeta.yaml") + "; Telegram allows one bot per token",
	}
	if got := problems(t, err); !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
}

func TestLoadDirUnreadable(t *testing.T) {
	_, err := LoadDir(filepath.Join(t.TempDir(), "missing"))
	var errs Errors
	if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &errs) {
		t.Errorf("LoadDir(missing) = %v; want a not-exist error, not a list of file problems", err)
	}
}

// TestLoadFile checks one file the way LoadDir checks each of a folder's
// (`brainbot check FILE`).
func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"poet.yaml": brainWithEnv("Poet", "POET_TOKEN"),
		"nope.yaml": "name: Nope\ntelegram:\n  token_env: NOPE_TOKEN\n",
		"poet.txt":  brainWithEnv("Poet", "POET_TOKEN"),
	})
	b, err := LoadFile(filepath.Join(dir, "poet.yaml"))
	if err != nil || b.ID != "poet" || b.Telegram.TokenEnv != "POET_TOKEN" {
		t.Fatalf("LoadFile(poet.yaml) = %+v, %v", b, err)
	}
	_, dirErr := LoadDir(dir)
	for name, want := range map[string]string{
		"nope.yaml":    ":1: system_prompt: is required (who the bot is and how it answers)",
		"poet.txt":     ":1: a brain file name must end in .yaml or .yml",
		"missing.yaml": ":1: read brain file: open ",
	} {
		path := filepath.Join(dir, name)
		b, err := LoadFile(path)
		got := problems(t, err)
		if b != nil || len(got) != 1 || !strings.HasPrefix(got[0], path+want) {
			t.Errorf("LoadFile(%s) = %v, %q; want one problem %q", name, b, got, path+want)
		}
		if name == "nope.yaml" && !slices.Contains(problems(t, dirErr), got[0]) {
			t.Errorf("LoadDir does not report %q: %v", got[0], dirErr)
		}
	}
}
