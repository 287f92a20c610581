package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
	"brainbot/cmd/internal/stack"
	"brainbot/mcp/openaitest"
)

// A button works on whichever instance owns its conversation: the
// instance that answered stops, and the other resolves the tap on 🔊
// from the cluster's state, reads the answer aloud once, and answers a
// second tap without speaking again.
func TestClusterButtonsWorkOnAnotherInstance(t *testing.T) {
	c := newCluster(t, []string{"alpha"}, 0)
	brain := fmt.Sprintf("name: alpha\ntelegram:\n  token_env: %s\nsystem_prompt: You repeat.\nbuttons:\n  read_aloud: true\n", stack.TokenEnv("alpha"))
	if err := os.WriteFile(filepath.Join(c.dir, "brains", "alpha.yaml"), []byte(brain), 0o640); err != nil {
		t.Fatal(err)
	}
	ai := openaitest.NewServer()
	defer ai.Close()
	env := []string{"OPENAI_API_KEY=" + stack.OpenAIKey, "OPENAI_BASE_URL=" + ai.URL}
	instances := []*instance{c.start("i0", env...), c.start("i1", env...)}

	token := stack.Token("alpha")
	const user = 4242
	c.tg.SendText(token, user, user, "hello")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	answer, err := c.tg.WaitCall(ctx, token, func(call telegramtest.Call) bool {
		return call.Method == "sendMessage" && call.ChatID() == user && len(call.Buttons()) == 1
	})
	if err != nil {
		t.Fatalf("no answer with 🔊: %v", err)
	}
	// The instance that answered logs its summary line once the buttons
	// are placed under the answer (a tap before that, which no person is
	// quick enough for, is refused): it tells which instance owns the
	// conversation.
	for c.summaries("alpha", user) == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	owner, other := instances[0], instances[1]
	if !conversationsOn(owner)[user] {
		owner, other = other, owner
	}
	c.kill(owner.name, syscall.SIGTERM)

	data := answer.Buttons()[0][0].Data
	_, query := c.tg.Tap(token, user, user, answer.MessageID, data)
	if tapped, err := c.tg.WaitAnswer(ctx, token, query); err != nil || tapped.Param("text") != conversation.NoticeReading {
		t.Fatalf("tap answered %q, %v; log of %s: %s", tapped.Param("text"), err, other.name, c.tail(other.name))
	}
	if _, err := c.tg.WaitCall(ctx, token, func(call telegramtest.Call) bool { return call.Method == "sendVoice" && call.ChatID() == user }); err != nil {
		t.Fatalf("no voice note: %v; log of %s: %s", err, other.name, c.tail(other.name))
	}
	_, query = c.tg.Tap(token, user, user, answer.MessageID, data)
	if tapped, err := c.tg.WaitAnswer(ctx, token, query); err != nil || tapped.Param("text") != conversation.NoticeRead {
		t.Errorf("second tap answered %q, %v", tapped.Param("text"), err)
	}
	var spoken []string
	for _, r := range ai.Requests() {
		if r.Path == "/v1/audio/speech" {
			spoken = append(spoken, r.Input)
		}
	}
	if len(spoken) != 1 || spoken[0] != stack.Rendered(answer) {
		t.Errorf("spoken %q, want once the answer %q", spoken, stack.Rendered(answer))
	}
}
