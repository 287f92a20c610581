package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// envBrain is a brain whose own stdio server (testdata/toolserver) is
// given a variable by reference.
const envBrain = `name: Envbot
telegram:
  token_env: ENVBOT_TOKEN
system_prompt: You answer with what your tools say.
mcp_servers:
  t:
    command: %s
    env: {TOOL_PASSPHRASE: "${TOOL_PASSPHRASE}"}
tools:
  allow: [mcp__t__env]
`

// `brainbot run -env-file FILE` with everything in the file, the model's
// credentials included, and only PATH, HOME and TMPDIR in the process's
// environment, as an admin runs it with the service's file: the real CLI
// answers, our tools reach OpenAI with the file's key, a brain's own
// server gets the file's variable by reference and the file's base
// variables (NO_PROXY) as the CLI passes them on, and check -connect on
// the same file starts that server as run does.
func TestEnvFileEndToEnd(t *testing.T) {
	s := startStack(t, stack.Config{
		Brainbot:  brainbotBinary(t),
		ClaudeCmd: claudetest.RequireCLI(t),
		Dir:       t.TempDir(),
		Brains: map[string]string{
			"narrator.yaml": narratorBrain,
			"speaker.yaml":  speakerBrain,
			"envbot.yaml":   fmt.Sprintf(envBrain, toolServerBinary(t)),
		},
		Env:     []string{"TOOL_PASSPHRASE=" + toolPassphrase, "NO_PROXY=localhost.invalid"},
		EnvFile: true,
		Logs:    testLogs(t),
	}, func(s *stack.Stack) { s.OpenAI.RequireKey(stack.OpenAIKey) })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if _, err := s.Stop(ctx, syscall.SIGTERM); err != nil {
			t.Errorf("stopping brainbot: %v", err)
		}
	})

	t.Run("the CLI gets the model's credentials from the file", func(t *testing.T) {
		if got := wantText(t, ask(t, s, "narrator", 1001, "hello from the file")); got != "You said: hello from the file (message 1)" {
			t.Errorf("reply = %q", got)
		}
	})

	t.Run("our voice tool gets the OpenAI key from the file", func(t *testing.T) {
		// The OpenAI stand-in answers only the file's key.
		if r := ask(t, s, "speaker", 1002, "tell me a story"); r.Summary.Str("outcome") != "ok" || len(r.Methods()) != 1 || r.Methods()[0] != "sendVoice" {
			t.Errorf("want one sendVoice, got %v\n%s", r.Methods(), r.Summary.Raw)
		}
	})

	t.Run("a brain's own server gets its reference and the base from the file", func(t *testing.T) {
		got := wantText(t, ask(t, s, "envbot", 1003, `#call mcp__t__env {"name":"TOOL_PASSPHRASE"} #call mcp__t__env {"name":"NO_PROXY"} #call mcp__t__env {"name":"ANTHROPIC_API_KEY"}`))
		for _, want := range []string{"TOOL_PASSPHRASE=" + toolPassphrase, "NO_PROXY=localhost.invalid", "ANTHROPIC_API_KEY is not set"} {
			if !strings.Contains(got, want) {
				t.Errorf("reply %q lacks %q", got, want)
			}
		}
		if strings.Contains(s.Logs().Text(), toolPassphrase) {
			t.Errorf("a log holds the file's secret %q", toolPassphrase)
		}
	})

	t.Run("check -connect with the same file starts the server as run does", func(t *testing.T) {
		code, stdout, stderr := runMain(t, []string{"PATH=" + os.Getenv("PATH")}, "check", "-connect", "-env-file", s.EnvFilePath())
		if code != exitOK || !strings.Contains(stdout, "    mcp server t: echo, env, fail, hidden, sleep\n") || strings.Contains(stdout, "not set") {
			t.Errorf("check -connect -env-file = %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
}
