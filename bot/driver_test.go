package bot

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"brainbot/bot/telegram"
	"brainbot/claude"
	"brainbot/claude/claudetest"
	"brainbot/mcp/toolstest"
)

func TestMain(m *testing.M) {
	claudetest.RunFakeCLIIfRequested()
	os.Exit(m.Run())
}

// withDriver runs requests through the real claude.Driver and the fake
// CLI (this test binary acting as `claude`), whose tool calls reach our
// real tool server.
func withDriver(t *testing.T) func(*Config) {
	return func(c *Config) {
		tools := toolstest.Start(t, c.DataDir, c.Log)
		d, err := claude.New(claude.Config{
			Command:  os.Args[0],
			DataDir:  c.DataDir,
			ToolsURL: tools.URL,
			Tickets:  tools.Tickets,
			Env:      claudetest.FakeCLIEnv(),
			Log:      c.Log,
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Claude = d
	}
}

func noFakeCLIsLeft(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for len(claudetest.FakeProcesses()) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if p := claudetest.FakeProcesses(); len(p) > 0 {
			t.Errorf("fake CLI processes left running: %v", p)
		}
	})
}

func TestWithDriverAllModes(t *testing.T) {
	noFakeCLIsLeft(t)
	h := newHarness(t, map[string]string{
		"chat":   brainFile(tokenA, "messages:\n  error: Oops.\n"),
		"voice":  brainFile(tokenB, "tts:\n  enabled: true\n"),
		"artist": brainFile(tokenC, "image:\n  enabled: true\n"),
		// Only the hanging request gets a short timeout: on a loaded
		// machine an ordinary one can take longer than any short bound.
		"sleepy": brainFile(tokenD, "claude:\n  timeout: 2s\nmessages:\n  error: Oops.\n"),
	}, withDriver(t))

	if got := h.exchange(tokenA, 7, "hello"); got.Param("text") != "You said: hello" {
		t.Fatalf("first reply = %q", got.Param("text"))
	}
	// The session is resumed: the fake CLI numbers the session's messages.
	if got := h.exchange(tokenA, 7, "again"); got.Param("text") != "You said: again (message 2)" {
		t.Fatalf("resumed reply = %q", got.Param("text"))
	}
	if got := h.exchange(tokenA, 7, "#fail"); got.Param("text") != "Oops." {
		t.Fatalf("model error reply = %q", got.Param("text"))
	}
	// A CLI that stops talking is ended by the brain's timeout.
	if got := h.exchange(tokenD, 8, "#hang"); got.Param("text") != "Oops." {
		t.Fatalf("hang reply = %q", got.Param("text"))
	}
	h.srv.SendText(tokenA, 9, 9, "#long")
	parts := h.waitSent(tokenA, 5)
	if len(parts[3].Param("text")) > telegram.MaxMessageLen || parts[3].ChatID() != 9 || parts[4].ChatID() != 9 {
		t.Fatalf("long reply not split: %s", describeCalls(parts[3:]))
	}

	v := h.exchange(tokenB, 7, "sing")
	if v.Method != "sendVoice" || len(v.Files["voice"].Data) == 0 || !strings.HasPrefix(v.Files["voice"].Name, "bot-voice-user-7-") {
		t.Fatalf("voice reply = %s %q", v.Method, v.Files["voice"].Name)
	}
	p := h.exchange(tokenC, 7, "draw a tree")
	if p.Method != "sendPhoto" || !strings.HasSuffix(p.Files["photo"].Name, ".png") {
		t.Fatalf("image reply = %s", p.Method)
	}
	// Turn 2 without the tool: the voice bot sends turn 1's text.
	if got := h.exchange(tokenB, 7, "#notool"); got.Method != "sendMessage" || !strings.HasPrefix(got.Param("text"), "You said: #notool") {
		t.Fatalf("speech fallback = %s %q", got.Method, got.Param("text"))
	}
	if got := h.exchange(tokenC, 7, "draw #toolerror"); got.Param("text") != "Sorry, something went wrong. Please try again." {
		t.Fatalf("image tool error = %s %q", got.Method, got.Param("text"))
	}
}

func TestWithDriverLostSession(t *testing.T) {
	noFakeCLIsLeft(t)
	h := newHarness(t, map[string]string{"chat": brainFile(tokenA, "messages:\n  expired: New conversation.\n")}, withDriver(t))
	h.exchange(tokenA, 7, "hello")
	// The CLI's session files are gone (another machine, cleaned HOME).
	if err := os.RemoveAll(h.data + "/claude/bot-chat/.fake-sessions"); err != nil {
		t.Fatal(err)
	}
	h.srv.SendText(tokenA, 7, 7, "still there?")
	got := h.waitSent(tokenA, 3)
	if got[1].Param("text") != "New conversation." || got[2].Param("text") != "You said: still there?" {
		t.Fatalf("after losing the session: %s", describeCalls(got))
	}
}

func TestWithDriverShutdownKillsCLI(t *testing.T) {
	noFakeCLIsLeft(t)
	h := newHarness(t, map[string]string{"chat": brainFile(tokenA, "")},
		func(c *Config) { withDriver(t)(c); c.Grace = 100 * time.Millisecond })
	h.srv.SendText(tokenA, 7, 7, "#hang")
	waitFor(t, func() bool { return len(claudetest.FakeProcesses()) > 0 })
	h.stop() // noFakeCLIsLeft checks the CLI was killed
	if n := len(h.srv.Sent(tokenA)); n != 0 {
		t.Fatalf("interrupted request answered: %s", describeCalls(h.srv.Sent(tokenA)))
	}
	if p, _ := pendingOf(context.Background(), h.store, "chat"); len(p) != 1 {
		t.Fatalf("interrupted request not kept for replay: %+v", p)
	}
}
