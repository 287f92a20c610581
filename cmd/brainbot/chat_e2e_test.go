package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/output"
)

// `brainbot chat` end to end: the built binary with a script piped in,
// the real Claude Code CLI, our MCP tools, and the stand-ins for the model
// and OpenAI (no Telegram: the chat needs no token). What the author reads
// is its standard output and exit code.

// chatRun is one `brainbot chat` that ran to its end.
type chatRun struct {
	code           int
	stdout, stderr string
	state          string // its -state folder
	// data is BRAINBOT_DATA, the service's state: the chat must leave it
	// alone.
	data string
}

// runChat pipes script into `brainbot chat args... brainFile` (brainFile
// written from brainYAML) against the stand-ins.
func runChat(t *testing.T, brainYAML, script string, args ...string) chatRun {
	t.Helper()
	cli := claudetest.RequireCLI(t)
	s, err := stack.New(stack.Config{Brainbot: brainbotBinary(t), ClaudeCmd: cli, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	brainFile := filepath.Join(t.TempDir(), "persona.yaml")
	writeFile(t, brainFile, brainYAML)
	run := chatRun{state: filepath.Join(t.TempDir(), "chat-state"), data: s.DataDir}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cmd := exec.CommandContext(ctx, brainbotBinary(t), append(append([]string{"chat", "-state", run.state}, args...), brainFile)...)
	cmd.Env = s.Env()
	cmd.Stdin = strings.NewReader(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		run.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	run.stdout, run.stderr = stdout.String(), stderr.String()
	t.Logf("brainbot chat exited %d\nstdout:\n%s\nstderr:\n%s", run.code, run.stdout, run.stderr)
	return run
}

// chatVoiceNote finds the path of the voice note the chat printed.
var chatVoiceNote = regexp.MustCompile(`(?m)^Speaker: \[voice message\] (\S+) \((\d+) bytes, ([0-9.]+) s\)$`)

func TestEndToEndChat(t *testing.T) {
	script := strings.Join([]string{
		"Good morning!", // a voice answer: the brain speaks
		"/voice",        // the user switches to text
		"How are you?",  // a text answer
		"#ask",          // a question with options...
		"2",             // ...answered by its number
		"/reset",
		"Are you there?", // a new session: message 1 again
	}, "\n") + "\n"
	run := runChat(t, speakerBrain, script, "-user", "42", "-first-name", "Grace")
	if run.code != 0 {
		t.Fatalf("exit code %d, want 0: every message was answered", run.code)
	}

	voice := chatVoiceNote.FindStringSubmatch(run.stdout)
	if voice == nil {
		t.Fatalf("no voice note printed with its path, size and duration:\n%s", run.stdout)
	}
	if dir := filepath.Join(run.state, "audio-output", "bot-persona", "user-42"); filepath.Dir(voice[1]) != dir {
		t.Errorf("voice note at %s, want it organised in %s", voice[1], dir)
	}
	if info, err := os.Stat(voice[1]); err != nil || info.Size() == 0 {
		t.Errorf("the voice note printed is not there: %v", err)
	}
	if _, err := os.Stat(output.SidecarPath(voice[1])); err != nil {
		t.Errorf("the voice note has no sidecar: %v", err)
	}

	for _, want := range []string{
		"you: /voice\nSpeaker: Voice replies are off: I will answer in text.\n",
		"you: How are you?\nSpeaker: You said: How are you? (message 2)\n",
		// The question, its options numbered, the choice, and the model's
		// answer to it.
		"Which city?\n  1. Paris\n  2. Rome\n  3. Lisbon\nyou: 2\n  → Rome\nSpeaker: You said: Rome (message 4)\n",
		"you: /reset\nSpeaker: Done: we start a new conversation. What shall we talk about?\n",
		"you: Are you there?\nSpeaker: You said: Are you there? (message 1)\n",
	} {
		if !strings.Contains(run.stdout, want) {
			t.Errorf("the chat's output lacks %q", want)
		}
	}
	// The chat keeps its state in its own folder, never the service's.
	if entries, err := os.ReadDir(run.data); err != nil || len(entries) > 0 {
		t.Errorf("BRAINBOT_DATA %s was written to (%d entries, %v)", run.data, len(entries), err)
	}
	if _, err := os.Stat(filepath.Join(run.state, "brainbot.log")); err != nil {
		t.Errorf("no brainbot.log in the chat's state folder: %v", err)
	}
}

// A message that gets no answer (the model fails) makes the exit code say
// so, for the author who scripts a conversation; the user sees the brain's
// error message, as in Telegram.
func TestEndToEndChatExitCodeSaysAnAnswerFailed(t *testing.T) {
	run := runChat(t, narratorBrain, "Hello\n#fail\n")
	if run.code != 1 {
		t.Errorf("exit code %d, want 1: one message got no answer", run.code)
	}
	for _, want := range []string{
		"Narrator: You said: Hello (message 1)\n",
		"you: #fail\nNarrator: Sorry, something went wrong",
		"(no answer: see brainbot.log",
	} {
		if !strings.Contains(run.stdout, want) {
			t.Errorf("the chat's output lacks %q", want)
		}
	}
}
