package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// A conversation's CLI process stays warm between its messages; when it
// is killed, when the brain is edited and when it was idle too long, the
// next message starts a new one that resumes the session: answered once,
// and the model still sees the earlier turns.
func TestEndToEndWarmConversation(t *testing.T) {
	s := newStackWith(t, []string{"BRAINBOT_WARM_IDLE=3s"})
	const user = 701
	prompt := "You are a warm storyteller."
	cliPIDs := func() []int {
		var pids []int
		for _, p := range claudetest.ProcessesWithEnv("HOME=" + s.Home) {
			if p.PID != s.PID() && strings.Contains(p.Cmdline, "--system-prompt "+prompt) {
				pids = append(pids, p.PID)
			}
		}
		return pids
	}
	var pid int
	for i, text := range []string{"one", "two", "three"} {
		r := ask(t, s, "narrator", user, text)
		if got, want := wantText(t, r), "You said: "+text+" (message "+string(rune('1'+i))+")"; got != want {
			t.Fatalf("reply %d = %q, want %q", i+1, got, want)
		}
		if warm := r.Summary.Fields["warm"] == true; warm != (i > 0) {
			t.Errorf("message %d warm = %v", i+1, warm)
		}
		pids := cliPIDs()
		if len(pids) != 1 || (pid != 0 && pids[0] != pid) {
			t.Fatalf("after message %d: CLI processes %v, want the one warm process %d", i+1, pids, pid)
		}
		pid = pids[0]
	}

	next := func(text string, n int) {
		t.Helper()
		r := ask(t, s, "narrator", user, text)
		if got, want := wantText(t, r), "You said: "+text+" (message "+string(rune('0'+n))+")"; got != want {
			t.Fatalf("reply = %q, want %q: the conversation must go on", got, want)
		}
		if r.Summary.Fields["warm"] == true {
			t.Errorf("%q ran warm, want a new process", text)
		}
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	next("after the kill", 4)

	prompt = "You are an EDITED storyteller."
	mark := s.Logs().Len()
	if err := s.WriteBrain("narrator.yaml", strings.Replace(narratorBrain, "You are a warm storyteller.", prompt, 1)); err != nil {
		t.Fatal(err)
	}
	waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "brain loaded" && l.Str("brain") == "narrator" })
	next("after the edit", 5)
	reqs := s.Model.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(last.System, prompt) {
		t.Errorf("the model's system prompt %q, want the edited one", last.System)
	}

	deadline := time.Now().Add(time.Minute)
	for len(cliPIDs()) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle process was not ended after BRAINBOT_WARM_IDLE")
		}
		time.Sleep(100 * time.Millisecond)
	}
	next("after idling", 6)
	if n := len(s.ChatCalls("narrator", user)); n != 6 {
		t.Errorf("%d replies for 6 messages", n)
	}
}
