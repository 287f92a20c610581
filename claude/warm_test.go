package claude

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"brainbot/claude/claudetest"
	"brainbot/mcp/toolstest"
)

// newWarmEnv is newFakeEnv with warm processes on.
func newWarmEnv(t *testing.T, warm WarmConfig) *fakeEnv {
	t.Helper()
	checkNoLeaks(t)
	data := t.TempDir()
	log, logs := observedLog(t)
	tools := toolstest.Start(t, data, log)
	d, err := New(Config{Command: os.Args[0], DataDir: data, ToolsURL: tools.URL, Tickets: tools.Tickets,
		Env: claudetest.FakeCLIEnv(), Launcher: fakeLauncher, Log: log, Warm: warm, cpuBusy: idleCPUs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close) // before the leak check, which runs last
	return &fakeEnv{d: d, data: data, tools: tools, logs: logs}
}

// follow makes req the conversation's next request after res: a new
// message, named as brainbot names each.
func follow(req Request, res *Result, prompt string) Request {
	req.Prompt, req.SessionID, req.Resume, req.MessageID = prompt, res.SessionID, true, uuid.NewString()
	return req
}

// Three requests of one conversation run in one CLI process: the later
// ones pay no start-up, cost what they cost (not the process's running
// total) and continue the session.
func TestWarmConversation(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4})
	req := e.request(Speech, "one")
	req.Conversation, req.MessageID = "bot/7", uuid.NewString()
	first := e.mustRun(t, req)
	if first.Warm || first.Startup <= 0 {
		t.Fatalf("first request: warm %v, startup %v; want a new process", first.Warm, first.Startup)
	}
	pids := claudetest.FakeProcesses()
	second := e.mustRun(t, follow(req, first, "two"))
	third := e.mustRun(t, follow(req, second, "three"))
	for i, res := range []*Result{second, third} {
		if !res.Warm || res.Startup != 0 {
			t.Errorf("request %d: warm %v, startup %v; want the warm process", i+2, res.Warm, res.Startup)
		}
		if res.CostUSD < 0.00499 || res.CostUSD > 0.00501 {
			t.Errorf("request %d cost %v, want its own two turns' 0.005", i+2, res.CostUSD)
		}
		// The line the CLI writes after the last result, on the message
		// named by its uuid, is no unknown event of this one.
		if res.UnknownEvents != 0 {
			t.Errorf("request %d: %d unknown events, want 0", i+2, res.UnknownEvents)
		}
	}
	if third.Text != "You said: three (message 5)" {
		t.Errorf("third answer %q: the session did not go on in the process", third.Text)
	}
	if got := claudetest.FakeProcesses(); len(got) != len(pids) || got[0] != pids[0] {
		t.Errorf("processes %v after three requests, want the first one's %v", got, pids)
	}
	if e.d.Warm() != 1 {
		t.Errorf("%d warm processes, want 1", e.d.Warm())
	}
}

// A warm process serves only requests it fits: an edited brain, another
// session (after /reset) or a dead process get a new one, which resumes
// the session.
func TestWarmProcessReplaced(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4})
	req := e.request(Text, "hello")
	req.Conversation = "bot/7"
	res := e.mustRun(t, req)

	edited := follow(req, res, "after the edit")
	edited.SystemPrompt = "You are an edited test bot."
	res = e.mustRun(t, edited)
	if res.Warm || res.Text != "You said: after the edit (message 2)" {
		t.Errorf("after a brain edit: warm %v, %q; want a new process resuming the session", res.Warm, res.Text)
	}

	// The replaced process ends in the background.
	waitFor(t, func() bool { return len(claudetest.FakeProcesses()) == 1 })
	procs := claudetest.FakeProcesses()
	if err := syscall.Kill(procs[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(claudetest.FakeProcesses()) == 0 })
	res = e.mustRun(t, follow(edited, res, "after the kill"))
	if res.Warm || res.Text != "You said: after the kill (message 3)" {
		t.Errorf("after SIGKILL: warm %v, %q; want a new process resuming the session", res.Warm, res.Text)
	}

	fresh := edited
	fresh.Prompt, fresh.SessionID, fresh.Resume = "after reset", req.SessionID[:len(req.SessionID)-1]+"f", false
	if fresh.SessionID == res.SessionID {
		fresh.SessionID = fresh.SessionID[:len(fresh.SessionID)-1] + "e"
	}
	if res = e.mustRun(t, fresh); res.Warm || res.Text != "You said: after reset" {
		t.Errorf("a new session: warm %v, %q; want a new process and conversation", res.Warm, res.Text)
	}
}

// Idle processes end after Idle, the least recently used beyond Max at
// once, and a process after RecycleAfter requests.
func TestWarmPoolBounds(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 1, Idle: time.Hour, RecycleAfter: 2})
	a, b := e.request(Text, "a"), e.request(Text, "b")
	a.Conversation, b.Conversation = "bot/1", "bot/2"
	resA := e.mustRun(t, a)
	e.mustRun(t, b) // the pool holds one: a's process ends
	waitFor(t, func() bool { return len(claudetest.FakeProcesses()) == 1 })
	if res := e.mustRun(t, follow(a, resA, "a again")); res.Warm {
		t.Error("a's process was kept beyond Max")
	}
	resA2 := e.mustRun(t, follow(a, resA, "a thrice"))
	if !resA2.Warm {
		t.Error("a's second process was not kept")
	}
	// Two requests served: recycled.
	waitFor(t, func() bool { return e.d.Warm() == 0 })

	idle := newWarmEnv(t, WarmConfig{Max: 4, Idle: 50 * time.Millisecond})
	req := idle.request(Text, "x")
	req.Conversation = "bot/9"
	idle.mustRun(t, req)
	waitFor(t, func() bool { return idle.d.Warm() == 0 && len(claudetest.FakeProcesses()) == 0 })
}

// A process whose resident memory passed RecycleMB is not kept: the
// next message starts a new one, and the log says why.
func TestWarmRecycledForItsMemory(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4, Idle: time.Hour, RecycleMB: 1}) // any process holds more
	req := e.request(Text, "big")
	req.Conversation = "bot/3"
	res := e.mustRun(t, req)
	if res = e.mustRun(t, follow(req, res, "again")); res.Warm {
		t.Error("a process past RecycleMB was kept warm")
	}
	if len(e.logs.FilterMessage("claude: warm process recycled for its memory").All()) == 0 {
		t.Error("no log line says the process was recycled for its memory")
	}
}

// Interrupt stops the turn a conversation's CLI runs, with the CLI's
// control request; the request ends and nothing is left running.
func TestInterrupt(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4})
	if e.d.Interrupt("bot/7") {
		t.Error("Interrupt with nothing running reported success")
	}
	req := e.request(Text, "#stoppable")
	req.Conversation = "bot/7"
	done := make(chan error, 1)
	go func() {
		_, err := e.d.Run(context.Background(), req)
		done <- err
	}()
	// Running means the request's line is written: the interrupt comes
	// after it.
	waitFor(t, func() bool { _, running := e.d.pool.Running("bot/7"); return running })
	if !e.d.Interrupt("bot/7") {
		t.Fatal("Interrupt found nothing running")
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrInterrupted) {
			t.Errorf("interrupted request: %v, want ErrInterrupted", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request did not end after the interrupt")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
	}
}

// OnText sees turn 1's text grow as the model writes it, ending with the
// whole reply; the events do not count as unknown.
func TestStreamedText(t *testing.T) {
	e := newFakeEnv(t)
	req := e.request(Text, "a reply long enough to arrive in several pieces")
	var seen []string
	req.OnText = func(text string) { seen = append(seen, text) }
	res := e.mustRun(t, req)
	if len(seen) < 3 || seen[len(seen)-1] != res.Text {
		t.Fatalf("streamed %q, want several growing texts ending in %q", seen, res.Text)
	}
	for i := 1; i < len(seen); i++ {
		if !strings.HasPrefix(seen[i], seen[i-1]) {
			t.Fatalf("streamed text shrank: %q then %q", seen[i-1], seen[i])
		}
	}
	if res.UnknownEvents != 0 {
		t.Errorf("%d unknown events: stream events must not count", res.UnknownEvents)
	}
}
