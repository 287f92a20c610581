package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// TestAnsweredNeedsARequestThatWentWell: a bot whose model fails still
// sends one sendMessage, the brain's error text; the demo must call that
// a failure.
func TestAnsweredNeedsARequestThatWentWell(t *testing.T) {
	ex := exchange{bot: "narrator", user: 1001, says: "Tell me a story about a lighthouse.", want: "sendMessage"}
	reply := func(outcome string, methods ...string) stack.Reply {
		r := stack.Reply{Summary: stack.Line{Msg: "request", Fields: map[string]any{"bot": "narrator", "outcome": outcome}}}
		for _, m := range methods {
			r.Calls = append(r.Calls, telegramtest.Call{Method: m, Code: 200,
				Params: map[string]string{"text": "Sorry, something went wrong. Please try again."}})
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		reply stack.Reply
		want  bool
	}{
		{"answered", reply("ok", "sendMessage"), true},
		{"error text", reply("error", "sendMessage"), false},
		{"failed", reply("failed", "sendMessage"), false},
		{"wrong kind", reply("ok", "sendVoice"), false},
		{"two replies", reply("ok", "sendMessage", "sendMessage"), false},
		{"nothing", reply("ok"), false},
	} {
		if got := answered(ex, tc.reply); got != tc.want {
			t.Errorf("%s: answered = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRepoRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := repoRoot(wd)
	if err != nil || root != filepath.Dir(filepath.Dir(wd)) {
		t.Errorf("repoRoot(%s) = %q, %v; want the folder two up", wd, root, err)
	}
	if root, err := repoRoot(t.TempDir()); err == nil {
		t.Errorf("repoRoot outside the repository = %q", root)
	}
}

func TestPinnedClaude(t *testing.T) {
	root := t.TempDir()
	if _, err := pinnedClaude(root); err == nil || !strings.Contains(err.Error(), "make claude-cli") {
		t.Errorf("no CLI installed: %v, want a hint to run make claude-cli", err)
	}
	install := func(version string) string {
		path := filepath.Join(root, ".cache", "claude-code-"+version, "node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	want := install("2.1.328")
	if got, err := pinnedClaude(root); got != want || err != nil {
		t.Errorf("pinnedClaude = %q, %v; want %s", got, err, want)
	}
	install("2.2.0")
	if _, err := pinnedClaude(root); err == nil || !strings.Contains(err.Error(), "-claude") {
		t.Errorf("two CLIs: %v, want a request to choose with -claude", err)
	}
}

// TestDemo runs `make demo` as the README promises it: every exchange and
// the panel answered as they should, offline.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brainbot and runs the whole demo")
	}
	var out strings.Builder
	err := run(t.Context(), &out, options{claudeCmd: claudetest.RequireCLI(t)})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"ok: answered with Voice", "ok: answered with Photo", "ok: the panel ran", "All exchanges answered as they should."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out.String())
		}
	}
}
