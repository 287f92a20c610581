package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/message"
	"brainbot/state/jetstream"
	"brainbot/state/jetstream/natstest"
)

// Going back from a cluster to one instance: a conversation held in the
// cluster goes on, after `brainbot carry -to sqlite`, on an instance of
// its own (another data folder, as on another machine) with its whole
// history; one whose transcript the cluster never stored is reported,
// and its user is told the brain's messages.expired with the answer. A
// second carry changes nothing.
func TestEndToEndCarryFromAClusterIntoOneInstance(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	url := natstest.Start(t)
	brains := map[string]string{"narrator.yaml": narratorBrain}
	clustered := startStack(t, stack.Config{Brainbot: brainbotBinary(t), ClaudeCmd: cli, Dir: t.TempDir(), Brains: brains,
		Env: []string{"BRAINBOT_GRACE=20s", "BRAINBOT_NATS_URL=" + url, "BRAINBOT_INSTANCE=c1"}, Logs: testLogs(t)}, nil)
	wantText(t, ask(t, clustered, "narrator", 7, "my name is Ada"))
	if !modelHas(clustered.Model, "my name is Ada") {
		t.Fatal("the model never saw the first message")
	}
	// Bob's session is kept, its transcript never stored (its instance
	// died before it could).
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	c, err := jetstream.Connect(ctx, jetstream.Config{URL: url, Instance: "test"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Backend(func(string, string) string { return "" }).
		UseSession(ctx, message.Key{Bot: "narrator", Chat: 8}, "0f2b7c2e-1d4a-4c8e-9a51-7d3e2b9c4f10", time.Now())
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if code, err := clustered.Stop(ctx, syscall.SIGTERM); err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}

	carried := func(s *stack.Stack) string {
		cmd := exec.Command(brainbotBinary(t), "carry", "-to", "sqlite")
		cmd.Env = append(s.Env(), "BRAINBOT_NATS_URL="+url)
		out, err := cmd.CombinedOutput()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
			t.Fatalf("carry: %v (want exit 1: bob's could not be carried)\n%s", err, out)
		}
		return string(out)
	}
	var first, second string
	alone := startStack(t, stack.Config{Brainbot: brainbotBinary(t), ClaudeCmd: cli, Dir: t.TempDir(), Brains: brains,
		Env: []string{"BRAINBOT_GRACE=20s"}, Logs: testLogs(t)}, func(s *stack.Stack) {
		first, second = carried(s), carried(s)
	})
	for _, want := range []string{"carried: narrator chat 7 ", "failed: narrator chat 8 ", "no transcript of the session is kept",
		"1 conversation carried to sqlite, 0 already there, 0 kept (newer there), 1 failed"} {
		if !strings.Contains(first, want) {
			t.Errorf("carry printed no %q:\n%s", want, first)
		}
	}
	if want := "0 conversations carried to sqlite, 1 already there, 0 kept (newer there), 1 failed"; !strings.Contains(second, want) {
		t.Errorf("the second carry printed no %q:\n%s", want, second)
	}

	wantText(t, ask(t, alone, "narrator", 7, "what is my name?"))
	wantResumedWith(t, alone, "my name is Ada")
	expired := "I had to start a new conversation, so I don't remember what we said before."
	if texts := ask(t, alone, "narrator", 8, "hello again").Texts(); !slices.Contains(texts, expired) {
		t.Errorf("bob got %q, not messages.expired", texts)
	}
}

// Joining a cluster: a conversation of one instance, carried with
// `brainbot carry -to cluster`, goes on with its history on an instance of
// the cluster on another machine (its transcript restored from the
// cluster).
func TestEndToEndCarryFromOneInstanceIntoACluster(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	url := natstest.Start(t)
	brains := map[string]string{"narrator.yaml": narratorBrain}
	alone := startStack(t, stack.Config{Brainbot: brainbotBinary(t), ClaudeCmd: cli, Dir: t.TempDir(), Brains: brains,
		Env: []string{"BRAINBOT_GRACE=20s"}, Logs: testLogs(t)}, nil)
	wantText(t, ask(t, alone, "narrator", 7, "my name is Ada"))
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if code, err := alone.Stop(ctx, syscall.SIGTERM); err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}
	cmd := exec.Command(brainbotBinary(t), "carry", "-to", "cluster")
	cmd.Env = append(alone.Env(), "BRAINBOT_NATS_URL="+url)
	out, err := cmd.CombinedOutput()
	if want := "1 conversation carried to cluster, 0 already there, 0 kept (newer there), 0 failed"; err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("carry: %v; printed no %q:\n%s", err, want, out)
	}
	clustered := startStack(t, stack.Config{Brainbot: brainbotBinary(t), ClaudeCmd: cli, Dir: t.TempDir(), Brains: brains,
		Env: []string{"BRAINBOT_GRACE=20s", "BRAINBOT_NATS_URL=" + url, "BRAINBOT_INSTANCE=c1"}, Logs: testLogs(t)}, nil)
	wantText(t, ask(t, clustered, "narrator", 7, "what is my name?"))
	wantResumedWith(t, clustered, "my name is Ada")
}

// wantResumedWith asserts the model's latest request holds the user's
// earlier words text: the conversation resumed with its history.
func wantResumedWith(t *testing.T, s *stack.Stack, text string) {
	t.Helper()
	reqs := s.Model.Requests()
	if len(reqs) == 0 || !slices.ContainsFunc(reqs[len(reqs)-1].Messages, func(m claudetest.Message) bool {
		return m.Role == "user" && slices.ContainsFunc(m.Content, func(b claudetest.Block) bool { return b.Text == text })
	}) {
		t.Errorf("the resumed request does not hold %q\n%s", text, s.Logs().Tail(10))
	}
}
