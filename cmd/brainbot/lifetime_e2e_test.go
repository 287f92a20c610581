package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// keeperBrain has a stdio MCP server that outlives what it can
// (testdata/toolserver with TOOLSERVER_STUBBORN: it ignores EOF, SIGINT,
// SIGTERM and SIGHUP, and has a child as deaf); %s is its path. Its
// variables come from brainbot's environment, where KEEPER_MARK marks
// every process of the test.
const keeperBrain = `name: Keeper
telegram:
  token_env: KEEPER_TOKEN
system_prompt: You keep things.
mcp_servers:
  t:
    command: %s
    env: {TOOLSERVER_STUBBORN: "${TOOLSERVER_STUBBORN}", KEEPER_MARK: "${KEEPER_MARK}"}
tools:
  allow: [mcp__t__echo]
`

// A brain's MCP server, started by the real CLI through brainbot mcp exec,
// does not outlive brainbot: not when brainbot stops, not when it is
// killed with SIGKILL (the CLI dies with it, and then nothing reaps), even
// a server that ignores its input closing and every signal but SIGKILL,
// and what that server started.
func TestEndToEndBrainServersDieWithBrainbot(t *testing.T) {
	mark := rand.Text()
	markEnv := "KEEPER_MARK=" + mark
	t.Cleanup(func() {
		for _, p := range claudetest.ProcessesWithEnv(markEnv) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	s := startStack(t, stack.Config{
		Brainbot:  brainbotBinary(t),
		ClaudeCmd: claudetest.RequireCLI(t),
		Dir:       t.TempDir(),
		Brains:    map[string]string{"keeper.yaml": fmt.Sprintf(keeperBrain, toolServerBinary(t))},
		Env:       []string{"BRAINBOT_HTTP_ADDR=127.0.0.1:0", "TOOLSERVER_STUBBORN=1", markEnv},
		Logs:      testLogs(t),
	}, nil)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if sig == syscall.SIGKILL { // brainbot again, after the stop
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			err := s.Start(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		r := ask(t, s, "keeper", 951, `keep it #call mcp__t__echo {"text":"kept"}`)
		if got := wantText(t, r); got != claudetest.ToolsReplyPrefix+"mcp__t__echo said: echo: kept" {
			t.Fatalf("reply = %q, want the server's answer", got)
		}
		servers := 0
		for _, p := range claudetest.ProcessesWithEnv(markEnv) {
			if strings.Contains(p.Cmdline, "toolserver") {
				servers++
			}
		}
		if servers < 2 {
			t.Fatalf("%d toolserver processes, want the server and its child at least", servers)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		_, err := s.Stop(ctx, sig)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		wantNoneWithEnv(t, markEnv, fmt.Sprintf("brainbot ended with %v", sig))
	}
}

// wantNoneWithEnv waits until no process carries kv in its environment,
// with a bound (nothing else tells), and fails naming those left.
func wantNoneWithEnv(t *testing.T, kv, after string) {
	t.Helper()
	var left []claudetest.Process
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = claudetest.ProcessesWithEnv(kv); len(left) == 0 {
			return
		}
	}
	var names []string
	for _, p := range left {
		names = append(names, fmt.Sprintf("%d %s", p.PID, p.Cmdline))
	}
	t.Errorf("after %s, left running:\n%s", after, strings.Join(names, "\n"))
}
