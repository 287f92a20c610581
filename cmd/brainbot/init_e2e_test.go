package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/mcp/openaitest"
)

// `brainbot init` unattended (every answer a flag), against the Bot API
// stand-in for getMe, the model's and OpenAI's: the files it writes are
// what doctor and run accept, and it never overwrites them.
func TestEndToEndInit(t *testing.T) {
	s, _ := standIns(t)
	dir := filepath.Join(t.TempDir(), "mybots")
	token := stack.Token("lighthouse")
	args := []string{"init", "-dir", dir, "-token", token, "-id", "lighthouse", "-kind", "voice",
		"-model-credential", claudetest.APIKey, "-openai-key", stack.OpenAIKey}

	code, stdout, stderr := runMain(t, s.Env(), args...)
	t.Logf("init exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	if code != 0 {
		t.Fatalf("init exited %d, want 0: doctor accepts what it wrote", code)
	}
	envFile, brainFile := filepath.Join(dir, "brainbot.env"), filepath.Join(dir, "brains", "lighthouse.yaml")
	if info, err := os.Stat(envFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("env file: %v, mode %v; want mode 0600", err, info.Mode().Perm())
	}
	for _, want := range []string{
		"Telegram knows this bot as @" + telegramtest.Username(token),
		"ok    bot lighthouse: @" + telegramtest.Username(token),
		"1 of 1 bots would run (lighthouse)",
		"brainbot run -env-file " + envFile,
		"brainbot chat -env-file " + envFile + " " + brainFile,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("init's output lacks %q", want)
		}
	}

	// It refuses to overwrite what it wrote.
	before, _ := os.ReadFile(envFile)
	if code, _, stderr := runMain(t, s.Env(), args...); code != 1 || !strings.Contains(stderr, "exists: init never overwrites") {
		t.Errorf("a second init exited %d (%s), want 1: the env file exists", code, stderr)
	}
	if after, _ := os.ReadFile(envFile); string(after) != string(before) {
		t.Error("a second init changed the env file")
	}

	// run takes the env file alone: the bot starts polling Telegram.
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	run := exec.CommandContext(ctx, brainbotBinary(t), "run", "-env-file", envFile)
	run.Env = append(s.Env(), "BRAINBOT_LOG_FILE=")
	logs, err := run.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = run.Process.Signal(syscall.SIGTERM)
		_ = run.Wait()
	}()
	lines := bufio.NewScanner(logs)
	for lines.Scan() {
		if strings.Contains(lines.Text(), `"telegram bot polling"`) && strings.Contains(lines.Text(), `"lighthouse"`) {
			return
		}
	}
	t.Fatal("brainbot run -env-file did not start the bot init set up")
}

// Without flags, init asks: the answers come on standard input, a line
// each, with the kind's default taken from an empty line.
func TestInitAsks(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	openAI := openaitest.NewServer()
	defer openAI.Close()
	dir := t.TempDir()
	token := stack.Token("asked")
	var out, errOut strings.Builder
	m := &Main{Stdin: strings.NewReader(token + "\n\nsk-ant-oat01-subscription\n\n"), Stdout: &out, Stderr: &errOut,
		Environ: []string{"TELEGRAM_API_URL=" + tg.URL, "CLAUDE_CMD=/nonexistent/claude"}}
	code := m.Run(context.Background(), []string{"init", "-dir", dir, "-id", "asked"})
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	// doctor fails on the missing CLI, after the files are written.
	if code != 1 {
		t.Errorf("init exited %d, want 1 (doctor finds no CLI)", code)
	}
	env, err := os.ReadFile(filepath.Join(dir, "brainbot.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ASKED_TOKEN=" + token, "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-subscription", "CLAUDE_CMD=/nonexistent/claude"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("env file lacks %q:\n%s", want, env)
		}
	}
	if strings.Contains(string(env), "OPENAI_API_KEY") {
		t.Error("a text bot's env file has an OpenAI key it was never asked for")
	}
	if !strings.Contains(out.String(), "doctor found problems") {
		t.Error("init did not say doctor found problems")
	}
	// A bot that cannot hear voice messages says so in its brain, so that
	// doctor has nothing to warn of.
	if strings.Contains(out.String(), "voice messages in") {
		t.Error("doctor warns that the text bot cannot hear voice messages")
	}
}

// standIns makes the stand-ins of a stack (Telegram, the model, OpenAI)
// for a command that is not run: init, chat. It returns the stack and the
// Claude CLI its environment names.
func standIns(t *testing.T) (*stack.Stack, string) {
	t.Helper()
	cli := claudetest.RequireCLI(t)
	s, err := stack.New(stack.Config{Brainbot: brainbotBinary(t), ClaudeCmd: cli, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, cli
}

// envWithout is env less the variables named.
func envWithout(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// The CLI and the Bot API given to init as flags are the ones its doctor
// checks and the ones its env file keeps for chat and run: nothing of them
// is in the environment.
func TestEndToEndInitKeepsItsFlags(t *testing.T) {
	s, cli := standIns(t)
	dir := filepath.Join(t.TempDir(), "mybots")
	token := stack.Token("flagged")
	code, stdout, stderr := runMain(t, envWithout(s.Env(), "CLAUDE_CMD", "TELEGRAM_API_URL"), "init", "-dir", dir,
		"-claude-cmd", cli, "-telegram-api-url", s.Telegram.URL,
		"-token", token, "-kind", "text", "-model-credential", claudetest.APIKey, "-openai-key", stack.OpenAIKey)
	t.Logf("init exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	if code != 0 {
		t.Errorf("init exited %d, want 0: doctor checks the CLI and the Bot API of the flags", code)
	}
	assertEnvFile(t, filepath.Join(dir, "brainbot.env"), "CLAUDE_CMD="+cli, "TELEGRAM_API_URL="+s.Telegram.URL)
}

// Given no CLI, with none on the PATH, init takes the one `make
// claude-cli` installed in the checkout it runs in, and keeps it in the
// env file.
func TestEndToEndInitFindsTheCLIOfMake(t *testing.T) {
	if found, err := exec.LookPath("claude"); err == nil {
		t.Skipf("a claude on the PATH (%s) comes first", found)
	}
	s, cli := standIns(t)
	checkout := t.TempDir()
	pinned := filepath.Join(checkout, ".cache", "claude-code-"+testedClaudeVersion, "node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude")
	if err := os.MkdirAll(filepath.Dir(pinned), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cli, pinned); err != nil {
		t.Fatal(err)
	}
	t.Chdir(checkout)
	dir := filepath.Join(t.TempDir(), "mybots")
	code, stdout, stderr := runMain(t, envWithout(s.Env(), "CLAUDE_CMD"), "init", "-dir", dir,
		"-token", stack.Token("found"), "-kind", "text", "-model-credential", claudetest.APIKey, "-openai-key", stack.OpenAIKey)
	t.Logf("init exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	if code != 0 {
		t.Errorf("init exited %d, want 0: doctor checks the CLI of make claude-cli", code)
	}
	assertEnvFile(t, filepath.Join(dir, "brainbot.env"), "CLAUDE_CMD="+pinned)
}

// assertEnvFile fails t unless the env file at path has each line of want.
func assertEnvFile(t *testing.T, path string, want ...string) {
	t.Helper()
	env, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range want {
		if !strings.Contains(string(env), "\n"+line+"\n") {
			t.Errorf("the env file lacks %q:\n%s", line, env)
		}
	}
}

// init asks a bot that speaks or draws for the OpenAI key, saying why in
// a sentence that reads.
func TestInitSaysWhyItAsksForTheOpenAIKey(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	for kind, why := range map[string]string{
		"voice":    "An OpenAI API key: the bot's voice comes from OpenAI: ",
		"pictures": "An OpenAI API key: the bot's pictures come from OpenAI: ",
	} {
		var out strings.Builder
		m := &Main{Stdin: strings.NewReader(stack.Token(kind) + "\n" + kind + "\nsk-ant-oat01-subscription\nsk-openai\n"), Stdout: &out, Stderr: io.Discard,
			Environ: []string{"TELEGRAM_API_URL=" + tg.URL, "CLAUDE_CMD=/nonexistent/claude"}}
		m.Run(context.Background(), []string{"init", "-dir", t.TempDir(), "-id", kind})
		if !strings.Contains(out.String(), why) {
			t.Errorf("init of a %s bot does not ask %q:\n%s", kind, why, out.String())
		}
	}
}
