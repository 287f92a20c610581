package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"brainbot/state"
	"brainbot/state/sqlite"
)

func TestUsageReport(t *testing.T) {
	data := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, u := range []state.Usage{
		{At: now.Add(-time.Hour), Bot: "voice", User: 1, Mode: "speech", Outcome: "ok", InputTokens: 1200, OutputTokens: 80, ClaudeUSD: 0.012, OpenAIUSD: 0.003},
		{At: now.Add(-2 * time.Hour), Bot: "voice", User: 2, Mode: "speech", Outcome: "error", InputTokens: 1000, ClaudeUSD: 0.01},
		{At: now.Add(-3 * 24 * time.Hour), Bot: "voice", User: 1, Mode: "text", Outcome: "ok", ClaudeUSD: 1},
		{At: now.Add(-time.Hour), Bot: "chat", User: 3, Mode: "text", Outcome: "ok", ClaudeUSD: 0.5},
		// A forgotten user's record: it stays, without the id.
		{At: now.Add(-time.Hour), Bot: "chat", User: 0, Mode: "text", Outcome: "ok", ClaudeUSD: 0.25},
	} {
		if err := db.RecordUsage(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	env := []string{"BRAINBOT_DATA=" + data}

	code, stdout, stderr := runMain(t, env, "usage", "-brain", "voice")
	if code != exitOK {
		t.Fatalf("usage = %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "voice") || !strings.Contains(lines[1], "speech") ||
		!strings.Contains(lines[1], "2") || !strings.Contains(lines[2], "0.0250") {
		t.Errorf("usage -brain voice:\n%s", stdout)
	}
	_, stdout, _ = runMain(t, env, "usage", "-since", "7d", "-by", "user", "-json")
	var rows []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("not JSON lines: %v\n%s", err, stdout)
		}
		rows = append(rows, row)
	}
	if len(rows) != 5 || rows[0]["brain"] != "chat" || rows[2]["user"] != 1.0 || rows[2]["mode"] != "speech" {
		t.Errorf("usage -since 7d -by user -json:\n%s", stdout)
	}
	_, stdout, _ = runMain(t, env, "usage", "-by", "user", "-brain", "chat")
	if !regexp.MustCompile(`(?m)^ +chat +forgotten +text +1 +0 .* 0\.2500 *$`).MatchString(stdout) || strings.Contains(stdout, " 0  text") {
		t.Errorf("usage -by user names a forgotten user's line otherwise:\n%s", stdout)
	}
	// From an admin's shell, with the service's environment file.
	envFile := filepath.Join(t.TempDir(), "brainbot.env")
	writeFile(t, envFile, "# as in /etc/brainbot/brainbot.env\nBRAINBOT_DATA="+data+"\n")
	code, stdout, stderr = runMain(t, []string{"BRAINBOT_DATA=/nonexistent"}, "usage", "-env-file", envFile, "-brain", "chat")
	if code != exitOK || !strings.Contains(stdout, "0.7500") {
		t.Errorf("usage -env-file = %d:\n%s%s", code, stdout, stderr)
	}
	// Without the service's settings, the error says how to give them.
	code, _, stderr = runMain(t, []string{"BRAINBOT_DATA=" + t.TempDir()}, "usage")
	if code != exitError || !strings.Contains(stderr, "no such file or directory (not the service's data folder? Give the command its settings: -env-file /etc/brainbot/brainbot.env)") {
		t.Errorf("usage without a database = %d, %q", code, stderr)
	}
	for _, bad := range [][]string{{"usage", "-since", "soon"}, {"usage", "-by", "mode"}} {
		if code, _, _ := runMain(t, env, bad...); code != exitUsage {
			t.Errorf("%v = %d, want %d", bad, code, exitUsage)
		}
	}
}
