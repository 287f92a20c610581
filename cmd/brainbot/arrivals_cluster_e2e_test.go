package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// When an instance stops, the one that takes its partitions starts the
// CLIs of their recent conversations at once (the real CLI, resuming
// their sessions): the moved conversation's next message finds its
// process warm instead of waiting for a cold resume.
func TestClusterMovedConversationIsPrewarmed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two brainbot processes")
	}
	model := claudetest.NewModel()
	defer model.Close()
	c := newCluster(t, []string{"alpha"}, 0)
	env := append(loadEnv(claudetest.RequireCLI(t), model), "BRAINBOT_SPARES=0")
	instances := []*instance{c.start("i0", env...), c.start("i1", env...)}
	c.settle(2)

	token := stack.Token("alpha")
	const user = 4444
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ask := func(text, want string) {
		t.Helper()
		c.tg.SendText(token, user, user, text)
		if _, err := c.tg.WaitCall(ctx, token, func(call telegramtest.Call) bool {
			return call.Method == "sendMessage" && call.ChatID() == user && stack.Rendered(call) == want
		}); err != nil {
			t.Fatalf("no answer %q: %v; logs: %s %s", want, err, c.tail("i0"), c.tail("i1"))
		}
	}
	ask("first", "You said: first (message 1)")
	owner, survivor := instances[0], instances[1]
	if !conversationsOn(owner)[user] {
		owner, survivor = survivor, owner
	}
	c.kill(owner.name, syscall.SIGTERM)
	c.waitLog(survivor, time.Minute, "the moved conversation prewarmed", func(l map[string]any) bool {
		return l["msg"] == "moved conversations prewarmed" && l["prewarmed"] == float64(1) && l["moved"] == float64(1)
	}, 1)

	ask("second", "You said: second (message 2)")
	c.waitLog(survivor, time.Minute, "the summary of the moved conversation's message", func(l map[string]any) bool {
		return l["msg"] == "request" && l["chat"] == float64(user)
	}, 1)
	var summary map[string]any
	survivor.logs.each(func(l map[string]any) {
		if l["msg"] == "request" && l["chat"] == float64(user) {
			summary = l
		}
	})
	if summary["warm"] != true || summary["claude_startup_ms"] != float64(0) {
		t.Errorf("the moved conversation's next message: warm %v, claude_startup_ms %v; want its prewarmed process",
			summary["warm"], summary["claude_startup_ms"])
	}
}
