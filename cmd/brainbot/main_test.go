package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"brainbot/state/sqlite"
)

// runMain runs the program in-process, as main() would, and returns its
// exit code and output.
func runMain(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	// This test binary is brainbot for `mcp exec` too (TestMain).
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Environ: env, Executable: self}
	code = m.Run(context.Background(), args)
	return code, out.String(), errOut.String()
}

func TestCheckExampleBrains(t *testing.T) {
	code, stdout, stderr := runMain(t, []string{"NARRATOR_TOKEN=" + chatToken}, "check", "../../brains")
	if code != exitOK {
		t.Fatalf("check ../../brains = %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, id := range []string{"narrator.yaml", "voice.yaml", "painter.yaml"} {
		if !strings.Contains(stdout, id) {
			t.Errorf("check output does not list %s:\n%s", id, stdout)
		}
	}
	// Tokens that are not set are one note, not an error (CI has no
	// secrets), and not a note per brain.
	want := "note: no token here for 3 of 4 brains: clock (CLOCK_TOKEN not set), painter (PAINTER_TOKEN not set), voice (VOICE_TOKEN not set); brainbot run needs them, check does not\n"
	if !strings.Contains(stdout, want) || strings.Count(stdout, "note:") != 1 {
		t.Errorf("want one note, %q:\n%s", want, stdout)
	}
}

// Where the tokens are set, check finds what run would refuse: a token of
// the wrong form, and one token behind two brains (whatever their sources),
// the problem naming both files.
func TestCheckTokens(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "chat.yaml"), brainWith("CHAT_TOKEN", ""))
	writeFile(t, filepath.Join(dir, "copy.yaml"), brainWith("COPY_TOKEN", ""))
	writeFile(t, filepath.Join(dir, "filed.yaml"), "name: Filed\nsystem_prompt: hi\ntelegram:\n  token_file: filed.token\n")
	writeFile(t, filepath.Join(dir, "filed.token"), voiceToken+"\n")
	writeFile(t, filepath.Join(dir, "later.yaml"), "name: Later\nsystem_prompt: hi\ntelegram:\n  token_file: later.token\n")
	code, stdout, stderr := runMain(t, []string{"CHAT_TOKEN=" + chatToken, "COPY_TOKEN=" + chatToken}, "check", dir)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	wantLines(t, stdout,
		"ok  "+filepath.Join(dir, "filed.yaml"),
		"note: no token here for 1 of 4 brains: later (token file "+filepath.Join(dir, "later.token")+" does not exist); brainbot run needs them, check does not\n")
	wantLines(t, stderr,
		filepath.Join(dir, "copy.yaml")+":4: telegram.token_env: COPY_TOKEN holds the same token as CHAT_TOKEN of "+filepath.Join(dir, "chat.yaml")+"; Telegram allows one bot per token\n",
		"1 problem(s) in "+dir)
	if strings.Contains(stdout+stderr, "secret-token") {
		t.Errorf("a token is in the output:\n%s%s", stdout, stderr)
	}
}

// A token stays with the brain that has it: check blames the copy, as
// run does, although the copy comes first by name, and names both files.
func TestCheckKeepsATokenWithItsBrain(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "zeta.yaml"), brainWith("CHAT_TOKEN", ""))
	writeFile(t, filepath.Join(dir, "a-copy.yaml"), brainWith("COPY_TOKEN", ""))
	db, err := sqlite.Open(context.Background(), filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	number, _, _ := strings.Cut(chatToken, ":")
	if err := db.HoldTelegramBot(context.Background(), number, "zeta", time.Now()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, _, stderr := runMain(t, []string{"CHAT_TOKEN=" + chatToken, "COPY_TOKEN=" + chatToken, "BRAINBOT_BRAINS=" + dir, "BRAINBOT_DATA=" + data}, "check")
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	wantLines(t, stderr,
		filepath.Join(dir, "a-copy.yaml")+":4: telegram.token_env: COPY_TOKEN holds the same token as CHAT_TOKEN of "+filepath.Join(dir, "zeta.yaml")+"; Telegram allows one bot per token\n")
}

func TestCheckReportsFileLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.yaml"), "name: Good\nsystem_prompt: hi\ntelegram:\n  token_env: GOOD_TOKEN\n")
	writeFile(t, filepath.Join(dir, "bad.yaml"), "name: Bad\nsystem_prompt: hi\ntelegram:\n  token_env: BAD_TOKEN\ntts:\n  speed: 9\n")
	code, stdout, stderr := runMain(t, nil, "check", dir)
	if code != exitError {
		t.Errorf("exit = %d, want %d", code, exitError)
	}
	want := filepath.Join(dir, "bad.yaml") + ":6: tts.speed: must be between 0.25 and 4.0, got 9\n"
	if !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr = %q, want it to start with %q", stderr, want)
	}
	if !strings.Contains(stdout, "good.yaml") {
		t.Errorf("the valid brain is not listed:\n%s", stdout)
	}
}

func TestCheckDefaultsToBrainsVariable(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runMain(t, []string{"BRAINBOT_BRAINS=" + dir}, "check")
	if code != exitError || !strings.Contains(stderr, "no brain files") || !strings.Contains(stderr, dir) {
		t.Errorf("empty $BRAINBOT_BRAINS: exit %d, stderr %q", code, stderr)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{nil, exitUsage, "", "Usage:"},
		{[]string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{[]string{"--help"}, exitOK, "brainbot run", ""},
		{[]string{"check", "-h"}, exitOK, "", "Usage: brainbot check"},
		{[]string{"check", "a", "b"}, exitUsage, "", "at most one folder or file"},
		{[]string{"run", "-h"}, exitOK, "", "BRAINBOT_MAX_CLAUDE"},
		{[]string{"run", "-log-level", "loud"}, exitUsage, "", `BRAINBOT_LOG_LEVEL (-log-level) "loud"`},
		{[]string{"run", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{[]string{"doctor", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{[]string{"backup", "-log-level", "debug", "f.db"}, exitUsage, "", "flag provided but not defined: -log-level"},
		{[]string{"mcp", "-h"}, exitOK, "", "Usage: brainbot mcp"},
		{[]string{"mcp", "nope"}, exitUsage, "", `unknown MCP server "nope"`},
		{[]string{"version"}, exitOK, "brainbot ", ""},
	}
	for _, tt := range tests {
		code, stdout, stderr := runMain(t, nil, tt.args...)
		if code != tt.code || !strings.Contains(stdout, tt.wantStdout) || !strings.Contains(stderr, tt.wantStderr) {
			t.Errorf("brainbot %q: exit %d (want %d)\nstdout: %q (want %q)\nstderr: %q (want %q)",
				tt.args, code, tt.code, stdout, tt.wantStdout, stderr, tt.wantStderr)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every subcommand reads the configuration through the one loader, so a
// bad setting is reported the same way by each (issue 10: mcp and check
// used to read variables by hand).
func TestSubcommandsReportBadSettingsAlike(t *testing.T) {
	const want = `BRAINBOT_LOG_LEVEL (-log-level) "loud": must be debug, info, warn or error`
	for _, args := range [][]string{{"run"}, {"mcp", "tts"}, {"check", t.TempDir()}} {
		code, _, stderr := runMain(t, []string{"BRAINBOT_LOG_LEVEL=loud"}, args...)
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("brainbot %v with BRAINBOT_LOG_LEVEL=loud: exit %d, stderr %q; want exit %d and %q",
				args, code, stderr, exitUsage, want)
		}
	}
}

// check takes one brain file as well as a folder, and reports its problems
// the same way.
func TestCheckOneFile(t *testing.T) {
	code, stdout, stderr := runMain(t, nil, "check", "../../brains/voice.yaml")
	if code != exitOK || !strings.Contains(stdout, "ok  ../../brains/voice.yaml") {
		t.Fatalf("check voice.yaml = %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: Bad\nsystem_prompt: x\ntelegram:\n  token_env: BAD_TOKEN\ntts:\n  speed: 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runMain(t, nil, "check", bad)
	if code != exitError || !strings.Contains(stderr, bad+":6: tts.speed:") {
		t.Fatalf("check bad.yaml = %d, stderr:\n%s", code, stderr)
	}
	// A brain's memory is said with its bounds, and bounds out of range
	// with what they may be.
	code, stdout, _ = runMain(t, nil, "check", "../../brains/narrator.yaml")
	if want := `"Narrator" (text, memory: 20 notes of 200 characters per user)`; code != exitOK || !strings.Contains(stdout, want) {
		t.Errorf("check narrator.yaml = %d: %s, want %s", code, stdout, want)
	}
	// So are its reminders and check-ins.
	code, stdout, _ = runMain(t, nil, "check", "../../brains/voice.yaml")
	if want := `reminders: 20 per user, up to 365 days ahead, check-ins: after 3 days quiet, at most 2 a week, not in 22:00-08:00)`; code != exitOK || !strings.Contains(stdout, want) {
		t.Errorf("check voice.yaml = %d: %s, want %s", code, stdout, want)
	}
	if err := os.WriteFile(bad, []byte("name: Bad\nsystem_prompt: x\ntelegram:\n  token_env: BAD_TOKEN\nmemory:\n  enabled: true\n  max_notes: 51\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runMain(t, nil, "check", bad)
	if want := bad + ":7: memory.max_notes: must be between 1 and 50 (the notes kept per user; default 30), got 51"; code != exitError || !strings.Contains(stderr, want) {
		t.Errorf("check of a memory past its bound = %d, stderr:\n%s", code, stderr)
	}
}

func TestCheckPanels(t *testing.T) {
	brains, panels := t.TempDir(), t.TempDir()
	for _, id := range []string{"chat", "voice"} {
		writeFile(t, filepath.Join(brains, id+".yaml"), "name: "+id+"\nsystem_prompt: hi\ntelegram:\n  token_env: X_TOKEN_"+id+"\n")
	}
	writeFile(t, filepath.Join(panels, "good.yaml"), "name: Good panel\nmembers: [chat, voice]\nspeak: true\n")
	writeFile(t, filepath.Join(panels, "bad.yaml"), "members:\n  - chat\n  - ghost\ncomment_cap: 0\n")
	code, stdout, stderr := runMain(t, []string{"BRAINBOT_PANELS=" + panels}, "check", brains)
	if code != exitError {
		t.Errorf("exit = %d, want %d", code, exitError)
	}
	if want := filepath.Join(panels, "bad.yaml") + ":4: comment_cap: must be between 1 and 5, got 0\n"; !strings.Contains(stderr, want) {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
	if !strings.Contains(stdout, `panel "Good panel": chat, voice (speaks)`) {
		t.Errorf("the valid panel is not listed:\n%s", stdout)
	}
	writeFile(t, filepath.Join(panels, "bad.yaml"), "members:\n  - chat\n  - ghost\n")
	_, _, stderr = runMain(t, nil, "check", "-panels", panels, brains)
	if want := filepath.Join(panels, "bad.yaml") + `:3: members[1]: no brain "ghost" in the brains folder`; !strings.Contains(stderr, want) {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
	// The summary blames the panels, not the brains.
	if want := "1 problem(s) in " + panels + "\n"; !strings.HasSuffix(stderr, want) {
		t.Errorf("stderr = %q, want it to end %q", stderr, want)
	}
	writeFile(t, filepath.Join(brains, "bad.yaml"), "name: bad\n")
	_, _, stderr = runMain(t, nil, "check", "-panels", panels, brains)
	if want := "2 problem(s) in " + brains + ", 1 in " + panels + "\n"; !strings.HasSuffix(stderr, want) {
		t.Errorf("stderr = %q, want it to end %q", stderr, want)
	}
}

func TestCheckExamplePanels(t *testing.T) {
	code, stdout, stderr := runMain(t, nil, "check", "-panels", "../../panels", "../../brains")
	if code != exitOK || !strings.Contains(stdout, "panel ") {
		t.Fatalf("check -panels ../../panels ../../brains = %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
