package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/state/jetstream/natstest"
)

// An instance of a cluster dies in the narrowest window: it stored the
// turn's transcript in NATS and sent the reply, and Telegram had not
// confirmed it yet. The next owner, on another machine (none of the
// first one's files), answers the message again, and the model sees it
// once: the history moved whole, without the turn twice.
func TestEndToEndClusterCrashBeforeTheReplyIsConfirmed(t *testing.T) {
	s := newStackWith(t, []string{"BRAINBOT_NATS_URL=" + natstest.Start(t), "BRAINBOT_NATS_PARTITIONS=4"})
	const user = 731
	wantText(t, ask(t, s, "narrator", user, "first"))
	token := stack.Token("narrator")
	release := s.Telegram.Hold(token, "sendMessage")
	defer release()
	mark := s.Logs().Len()
	pending := s.Send("narrator", user, "second")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := s.Telegram.WaitCall(ctx, token, func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.ChatID() == user && strings.Contains(stack.Rendered(c), "second")
	}); err != nil {
		t.Fatalf("the reply never reached Telegram: %v", err)
	}
	stored := waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "claude request done" && l.Int("user") == user })
	if _, err := s.Stop(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, p := range claudetest.ProcessesUnder(s.DataDir) {
		_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	}
	// Another machine: nothing of the first one's sessions on disk.
	if err := os.RemoveAll(s.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.DataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	release()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := pending.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	texts := r.Texts()
	if len(texts) == 0 || texts[len(texts)-1] != "You said: second (message 2)" {
		t.Errorf("replies after the crash %q, want the last to be message 2 of the conversation: the message once in it", texts)
	}
	if id := r.Summary.Str("request_id"); id != stored.Str("request_id") {
		t.Errorf("request_id %q on the next owner, %q before the crash: want one", id, stored.Str("request_id"))
	}
	// The transcript was stored before the reply went out, so the next
	// owner restored the turn, and cut it (claude/rewind.go).
	waitLogFrom(t, s, mark, func(l stack.Line) bool {
		return l.Msg == "claude: message sent before; its unfinished turn is dropped from the session" &&
			l.Str("request_id") == stored.Str("request_id")
	})
	reqs := s.Model.Requests()
	seen := 0
	for _, msg := range reqs[len(reqs)-1].Messages {
		for _, b := range msg.Content {
			if msg.Role == "user" && b.Text == "second" {
				seen++
			}
		}
	}
	if seen != 1 {
		t.Errorf("the model's last request holds the message %d times, want once", seen)
	}
	if got := wantText(t, ask(t, s, "narrator", user, "third")); got != "You said: third (message 3)" {
		t.Errorf("next answer %q, want message 3: the history whole, the crashed turn once", got)
	}
}
