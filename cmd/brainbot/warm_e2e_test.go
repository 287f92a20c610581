package main

import (
	"brainbot/bot/telegramtest"
	"strings"
	"syscall"
	"testing"
	"time"

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
	// The conversation's processes: of its session (the bot's spare has
	// the same prompt).
	cliPIDs := func() []int {
		var pids []int
		for session, pid := range clis(s, prompt) {
			if session == sessionOf(t, s, user) {
				pids = append(pids, pid)
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
	waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "brain loaded" && l.Str("bot") == "narrator" })
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

// A long text reply streams through the real CLI as the model writes it:
// drafts in a private chat, edits of one message in a group; the last text
// the user sees is the final reply.
func TestEndToEndStreaming(t *testing.T) {
	s := newStack(t, nil)
	s.Model.SetPace(20 * time.Millisecond)
	token := stack.Token("narrator")

	r := ask(t, s, "narrator", 901, "tell me a story #long")
	// 6000 characters: split in two messages as without streaming; a
	// draft shows at most the first 4096.
	texts := r.Texts()
	if len(texts) != 2 {
		t.Fatalf("reply in %d messages, want 2", len(texts))
	}
	final := texts[0]
	var drafts []string
	for _, c := range s.Telegram.Sent(token, "sendMessageDraft") {
		if c.ChatID() == 901 {
			drafts = append(drafts, c.Param("text"))
		}
	}
	if len(drafts) < 2 {
		t.Fatalf("%d drafts, want the reply shown as it was written", len(drafts))
	}
	for _, d := range drafts {
		if !strings.HasPrefix(stripMarkdown(final), stripMarkdown(d)[:min(len(d), 40)]) {
			t.Errorf("draft %.60q does not start the reply %.60q", d, final)
		}
	}
	if r.Summary.Int("first_text_ms") <= 0 || r.Summary.Int("first_text_ms") >= r.Summary.Int("total_ms") {
		t.Errorf("first_text_ms %d of total %d: the first text must show before the end", r.Summary.Int("first_text_ms"), r.Summary.Int("total_ms"))
	}

	const group = -1009001
	s.Telegram.SendMessage(token, groupMessage(902, group, "a story please #long", "@"+telegramtest.Username(token)))
	waitLogFrom(t, s, 0, func(l stack.Line) bool { return l.Msg == "request" && l.Int("chat") == group })
	var edits []telegramtest.Call
	for _, c := range s.Telegram.Sent(token, "editMessageText") {
		if c.ChatID() == group {
			edits = append(edits, c)
		}
	}
	if len(edits) < 1 {
		t.Fatal("no edits of the streamed group message")
	}
	// The same long reply: its first part edited into the streamed
	// message, the second sent after it.
	groupMsgs := waitChat(t, s, token, group, 2)
	last := edits[len(edits)-1]
	if stack.Rendered(last) != final || stack.Rendered(groupMsgs[1]) != texts[1] {
		t.Errorf("group: final edit %.60q and second message %.60q, want the reply's two parts", stack.Rendered(last), stack.Rendered(groupMsgs[1]))
	}
	if last.Param("parse_mode") != "HTML" {
		t.Errorf("the final edit is not the formatted reply: parse_mode %q", last.Param("parse_mode"))
	}
}

// stripMarkdown drops the characters formatting changes, to compare
// streamed plain text with the final reply.
func stripMarkdown(s string) string {
	return strings.NewReplacer("*", "", "_", "", "`", "").Replace(s)
}
