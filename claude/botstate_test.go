package claude

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/claude/claudetest"
	"brainbot/mcp/toolstest"
)

// envOf runs "#env" for bot in e and returns the fake CLI's environment.
func envOf(t *testing.T, e *fakeEnv, bot string) map[string]string {
	t.Helper()
	req := e.request(Text, "#env")
	req.BotID = bot
	env := map[string]string{}
	for _, kv := range strings.Split(e.mustRun(t, req).Text, "\n") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// Each bot's CLI has a HOME and a Claude config folder of its own under
// the data folder: no bot sees another's settings or sessions, and none
// touches the operator's ~/.claude.
func TestEachBotHasItsOwnCLIState(t *testing.T) {
	operator := t.TempDir()
	t.Setenv("HOME", operator)
	t.Setenv("CLAUDE_CONFIG_DIR", filepath.Join(operator, "config"))
	e := newFakeEnv(t)
	for _, bot := range []string{"a", "b"} {
		env := envOf(t, e, bot)
		home := filepath.Join(e.data, "claude", "home", "bot-"+bot)
		config := filepath.Join(home, ".claude")
		if env["HOME"] != home || env["CLAUDE_CONFIG_DIR"] != config {
			t.Errorf("bot %s: HOME %q CLAUDE_CONFIG_DIR %q, want %s and %s", bot, env["HOME"], env["CLAUDE_CONFIG_DIR"], home, config)
		}
		for _, dir := range []string{home, config} {
			if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
				t.Errorf("bot %s: %s: %v, %v; want a folder of mode 0700", bot, dir, info, err)
			}
		}
		if got, err := os.ReadFile(filepath.Join(config, "settings.json")); err != nil || string(got) != botSettings {
			t.Errorf("bot %s: settings %q, %v; want ours", bot, got, err)
		}
	}
	if left, _ := os.ReadDir(operator); len(left) != 0 {
		t.Errorf("the operator's HOME got %v", left)
	}
}

// The settings the bot's CLI reads are the ones brainbot wrote: a changed
// file (an attacker's /config of an earlier brainbot, say) is logged, kept
// aside for the admin and replaced, at start-up and before every start of
// a CLI.
func TestChangedSettingsAreRestored(t *testing.T) {
	data := t.TempDir()
	config := filepath.Join(data, "claude", "home", "bot-a", ".claude")
	settings := filepath.Join(config, "settings.json")
	tampered := `{"model":"haiku"}`
	for _, dir := range []string{filepath.Join(data, "claude", "bot-a"), config} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(settings, []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	tools := toolstest.Start(t, data, zap.NewNop())
	d, err := New(Config{Command: os.Args[0], DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets,
		Env: claudetest.FakeCLIEnv(), Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	check := func(when string) {
		t.Helper()
		if got, _ := os.ReadFile(settings); string(got) != botSettings {
			t.Errorf("%s: settings %s, want ours", when, got)
		}
		if kept, _ := os.ReadFile(settings + ".rejected"); string(kept) != tampered {
			t.Errorf("%s: the changed file kept aside holds %q", when, kept)
		}
		found := taken(logs, "the Claude settings of a bot had been changed; restored")
		if len(found) != 1 || found[0].Level != zapcore.WarnLevel || found[0].ContextMap()["bot"] != "a" {
			t.Errorf("%s: log lines %v, want one warning naming the bot", when, found)
		}
	}
	check("at start-up")

	if err := os.WriteFile(settings, []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &fakeEnv{d: d, data: data, tools: tools}
	req := e.request(Text, "hello")
	req.BotID = "a"
	e.mustRun(t, req)
	check("before a CLI starts")
}

// An upgrade loses no conversation: the transcripts brainbot's CLIs kept
// in the shared config folder (CLAUDE_CONFIG_DIR, or ~/.claude) move into
// each bot's own at start-up. One already there stays as it is.
func TestSessionsMoveIntoTheBotsOwnConfig(t *testing.T) {
	data, operator := t.TempDir(), t.TempDir()
	work := filepath.Join(data, "claude", "bot-a")
	if err := os.MkdirAll(work, 0o750); err != nil {
		t.Fatal(err)
	}
	old := filepath.Dir(SessionFile("", operator, work, "x"))
	files := map[string]string{
		"11111111-1111-4111-8111-111111111111.jsonl":              `{"old":1}`,
		"11111111-1111-4111-8111-111111111111/tool-results/r.txt": "result",
		"22222222-2222-4222-8222-222222222222.jsonl":              `{"old":2}`,
	}
	for name, content := range files {
		path := filepath.Join(old, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Another bot's and the operator's own projects stay where they are.
	others := filepath.Join(operator, ".claude", "projects", "-home-me-code")
	if err := os.MkdirAll(others, 0o700); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(data, "claude", "home", "bot-a", ".claude", "projects", filepath.Base(old), "22222222-2222-4222-8222-222222222222.jsonl")
	if err := os.MkdirAll(filepath.Dir(newer), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newer, []byte(`{"new":2}`), 0o600); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zapcore.InfoLevel)
	tools := toolstest.Start(t, data, zap.NewNop())
	d, err := New(Config{Command: os.Args[0], DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets,
		Env: append(claudetest.FakeCLIEnv(), "HOME="+operator), Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for name, want := range map[string]string{
		"11111111-1111-4111-8111-111111111111.jsonl":              `{"old":1}`,
		"11111111-1111-4111-8111-111111111111/tool-results/r.txt": "result",
		"22222222-2222-4222-8222-222222222222.jsonl":              `{"new":2}`,
	} {
		path := filepath.Join(filepath.Dir(newer), name)
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	if got := d.SessionFile("a", "11111111-1111-4111-8111-111111111111"); got != filepath.Join(filepath.Dir(newer), "11111111-1111-4111-8111-111111111111.jsonl") {
		t.Errorf("SessionFile = %s, want the bot's own config folder", got)
	}
	if _, err := os.Stat(filepath.Join(old, "11111111-1111-4111-8111-111111111111.jsonl")); !os.IsNotExist(err) {
		t.Errorf("the moved transcript is still in the shared folder: %v", err)
	}
	if _, err := os.Stat(others); err != nil {
		t.Errorf("the operator's own project: %v", err)
	}
	all := logs.TakeAll()
	found := entries(all, "moved the bot's Claude sessions into its own config folder")
	if len(found) != 1 || found[0].ContextMap()["bot"] != "a" || found[0].ContextMap()["sessions"] != int64(1) {
		t.Errorf("log lines %+v, want one naming the bot and the one session moved", found)
	}
	if left := len(entries(all, "a session transcript is in both config folders; the bot's own is kept")); left != 1 {
		t.Errorf("%d warnings about the transcript found in both folders, want 1", left)
	}
	// The CLI's options say which settings it reads: only the bot's.
	args := d.args(Request{SessionID: "s"}, "cfg.json")
	if i := slices.Index(args, "--setting-sources"); i < 0 || args[i+1] != "user" {
		t.Errorf("args %q: want --setting-sources user", args)
	}
}

// taken takes every line logged so far and returns those saying msg.
func taken(logs *observer.ObservedLogs, msg string) []observer.LoggedEntry {
	return entries(logs.TakeAll(), msg)
}

func entries(all []observer.LoggedEntry, msg string) []observer.LoggedEntry {
	var found []observer.LoggedEntry
	for _, e := range all {
		if e.Message == msg {
			found = append(found, e)
		}
	}
	return found
}
