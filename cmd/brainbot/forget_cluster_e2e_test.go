package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// In a cluster a forget done through one instance is done on every one:
// each ends the forgotten conversation's warm CLI and deletes its copy of
// the transcript; the next message starts a new conversation.
func TestClusterForgetOnEveryInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two brainbot processes")
	}
	c := newCluster(t, []string{"alpha"}, 0)
	admin := "BRAINBOT_HTTP_ADDR=127.0.0.1:0"
	ins := []*instance{c.start("i0", admin), c.start("i1", admin)}
	token := stack.Token("alpha")
	const user = 4343
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	answered := func(text string) bool {
		_, err := c.tg.WaitCall(ctx, token, func(call telegramtest.Call) bool {
			return call.Method == "sendMessage" && call.ChatID() == user && stack.Rendered(call) == text
		})
		return err == nil
	}
	c.tg.SendText(token, user, user, "hello")
	if !answered("You said: hello") {
		t.Fatalf("no answer; logs: %s %s", c.tail("i0"), c.tail("i1"))
	}
	// Listed through each instance: each reads the stored transcript,
	// and keeps a copy (the fake CLI writes no turns the real one would).
	var session string
	for _, in := range ins {
		list := listConversations(t, socketEnv(instanceAdminSocket(t, in)), "-bot", "alpha")
		if len(list) != 1 || list[0].Chat != user || list[0].Bytes == 0 || list[0].Problem != "" {
			t.Fatalf("conversations through %s: %+v", in.name, list)
		}
		session = list[0].Session
	}
	copies := filesNamed(t, c.dir, session+".jsonl")
	if len(copies) != 2 {
		t.Fatalf("transcripts of %s: %q, want one on each instance", session, copies)
	}

	asked, elsewhere := ins[1], ins[0]
	env := socketEnv(instanceAdminSocket(t, asked))
	if code, out, stderr := runMain(t, env, "forget", "-bot", "alpha", "-user", "4343"); code != exitOK ||
		!strings.Contains(out, "1 conversation, 1 session") {
		t.Fatalf("forget through %s = %d: %s%s", asked.name, code, out, stderr)
	}
	c.waitLog(elsewhere, time.Minute, "the forget done elsewhere", func(l map[string]any) bool {
		return l["msg"] == "user forgotten through another instance" && l["user"] == float64(user) && l["transcripts"] == float64(1)
	}, 1)
	for _, in := range ins {
		for _, p := range claudetest.ProcessesUnder(in.data) {
			if strings.Contains(p.Cmdline, session) {
				t.Errorf("the warm CLI of the forgotten session still runs on %s: %s", in.name, p.Cmdline)
			}
		}
	}
	if left := filesNamed(t, c.dir, session+".jsonl"); len(left) != 0 {
		t.Errorf("transcripts left: %q", left)
	}
	c.tg.SendText(token, user, user, "again")
	if !answered("You said: again") { // the fake CLI numbers only a second message
		t.Errorf("the next message did not start a new conversation: %q", c.answers("alpha")[user])
	}
}
