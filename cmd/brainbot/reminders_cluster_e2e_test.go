package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/toolspec"
)

// A reminder kept in a three-instance cluster arrives once when the
// instance answering its conversation is killed before its time: the
// others' schedulers find it due, the log keeps it once, and the
// conversation's new owner writes it. The real CLI answers, as the
// remind tool needs it.
func TestEndToEndClusterReminderSurvivesAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three brainbot processes")
	}
	cli := claudetest.RequireCLI(t)
	model := claudetest.NewModel()
	t.Cleanup(model.Close)
	c := newCluster(t, []string{"keeper"}, 0)
	if err := os.WriteFile(filepath.Join(c.dir, "brains", "keeper.yaml"), []byte(reminderBrain), 0o640); err != nil {
		t.Fatal(err)
	}
	env := append(model.Env(), "CLAUDE_CMD="+cli, "BRAINBOT_CLAUDE_BARE=auto")
	for _, name := range []string{"i0", "i1", "i2"} {
		c.start(name, env...)
	}
	token := stack.Token("keeper")
	const user = 741
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	due := time.Now().Add(8 * time.Second).Truncate(time.Second)
	c.tg.SendText(token, user, user, fmt.Sprintf(`Remind me. #call %s {"at":%q,"text":"call mom"}`, toolspec.RemindTool, due.Format(time.RFC3339)))
	if _, err := c.tg.WaitCall(ctx, token, func(call telegramtest.Call) bool {
		return call.Method == "sendMessage" && call.ChatID() == user && strings.Contains(stack.Rendered(call), "said: Reminder ")
	}); err != nil {
		t.Fatalf("the reminder was never kept: %v", err)
	}
	// The instance that answered logs the request once the answer is out.
	holder := ""
	for holder == "" && ctx.Err() == nil {
		c.mu.Lock()
		for name, in := range c.procs {
			if conversationsOn(in)[user] {
				holder = name
			}
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	c.kill(holder, syscall.SIGKILL)
	if time.Now().After(due) {
		t.Logf("%s was killed after the reminder's time", holder)
	}

	reminder := func(call telegramtest.Call) bool {
		return call.Method == "sendMessage" && call.ChatID() == user && strings.Contains(stack.Rendered(call), "<reminder>call mom</reminder>")
	}
	if _, err := c.tg.WaitCall(ctx, token, reminder); err != nil {
		t.Fatalf("the reminder never came after %s was killed: %v", holder, err)
	}
	// Once: the answer to the next message comes after it, and no other.
	c.tg.SendText(token, user, user, "thanks")
	if _, err := c.tg.WaitCall(ctx, token, func(call telegramtest.Call) bool {
		return call.Method == "sendMessage" && call.ChatID() == user && strings.Contains(stack.Rendered(call), "You said: thanks")
	}); err != nil {
		t.Fatalf("no answer to thanks: %v", err)
	}
	n := 0
	for _, call := range c.tg.Sent(token, "sendMessage") {
		if call.Code == 200 && reminder(call) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the reminder came %d times, want once", n)
	}
}
