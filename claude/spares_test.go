package claude

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"brainbot/claude/claudetest"
	"brainbot/reaper"
	"brainbot/sysprompt"
)

// cliSessions maps the session of each live CLI whose HOME is under dir
// (every bot's CLI of a driver with that data folder) to its pid: what
// the operating system says was started, and with which session.
func cliSessions(dir string) map[string]int {
	sessions := map[string]int{}
	for _, p := range claudetest.ProcessesUnder(dir) {
		args := strings.Fields(p.Cmdline)
		for i, a := range args {
			if (a == "--session-id" || a == "--resume") && i+1 < len(args) {
				sessions[args[i+1]] = p.PID
			}
		}
	}
	return sessions
}

// newConversation is a request of a new conversation whose session the
// driver names.
func newConversation(req Request, conversation string) Request {
	req.SessionID, req.Resume, req.Conversation = "", false, conversation
	return req
}

// waitSpares waits until the driver's spare counts satisfy cond and
// returns them. Patiently: on a machine busy with other work (CI runs
// packages side by side) a spare waits for the CPUs up to 10 s (the
// pool's patience), then starts below that work.
func waitSpares(t testing.TB, d *Driver, cond func(SpareStats) bool) SpareStats {
	t.Helper()
	var s SpareStats
	for deadline := time.Now().Add(70 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if s = d.SpareStats(); cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("spares never as wanted: %+v", s)
		}
	}
}

// waitEnded waits until none of the CLIs of sessions runs.
func waitEnded(t *testing.T, e *fakeEnv, sessions map[string]int) {
	t.Helper()
	waitFor(t, func() bool {
		now := cliSessions(e.data)
		for session := range sessions {
			if _, alive := now[session]; alive {
				return false
			}
		}
		return true
	})
}

func readySpares(n int) func(SpareStats) bool {
	return func(s SpareStats) bool { return s.Ready == n && s.Starting == 0 }
}

// The first new conversation of a bot starts its spare; the next one is
// served by it — a process started before the request, whose session
// becomes the conversation's — and a replacement starts. The conversation
// goes on warm in that process.
func TestSpareServesNewConversation(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4, Spares: 1})
	first := e.mustRun(t, newConversation(e.request(Text, "hello"), "bot/1"))
	if first.Spare || uuid.Validate(first.SessionID) != nil {
		t.Fatalf("first request: spare %v, session %q; want a process of its own and a session the driver named", first.Spare, first.SessionID)
	}
	waitSpares(t, e.d, readySpares(1))
	before := cliSessions(e.data)

	res := e.mustRun(t, newConversation(e.request(Text, "hi there"), "bot/2"))
	if _, started := before[res.SessionID]; !res.Spare || !started || res.SessionID == first.SessionID || res.Text != "You said: hi there" {
		t.Fatalf("second conversation: spare %v, session %s (running before the request: %v), %q; want the spare's new session", res.Spare, res.SessionID, started, res.Text)
	}
	if s := e.d.SpareStats(); s.Taken != 1 || s.Missed != 1 || s.Failed != 0 {
		t.Errorf("stats %+v, want 1 taken, 1 missed (the first conversation), none failed", s)
	}
	waitSpares(t, e.d, readySpares(1))
	for session := range cliSessions(e.data) {
		if _, old := before[session]; !old && session != res.SessionID {
			goto replaced
		}
	}
	t.Fatal("no replacement spare started")
replaced:
	next := e.mustRun(t, follow(newConversation(e.request(Text, ""), "bot/2"), res, "and again"))
	if !next.Warm || next.Spare || next.Text != "You said: and again (message 2)" {
		t.Errorf("follow-up: warm %v, spare %v, %q; want the conversation's process, warm", next.Warm, next.Spare, next.Text)
	}
}

// The values of the prompt's per-message variables reach a spare with the
// message, not with the spawn: the spare's prompt has placeholders only,
// and a warm process gets each message's own values.
func TestSpareGetsTheMessagesValues(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4, Spares: 1})
	withVars := func(req Request, name, clock string) Request {
		req.SystemPrompt = "You are {{bot_name}}. It is {{time}}; greet {{user_first_name}}."
		req.PromptVars = sysprompt.Vars{sysprompt.BotName: "Clock", sysprompt.UserFirstName: name, sysprompt.Time: clock}
		return req
	}
	e.mustRun(t, withVars(newConversation(e.request(Text, "#note"), "bot/1"), "Ann", "09:00 UTC"))
	waitSpares(t, e.d, readySpares(1))
	for _, p := range claudetest.ProcessesUnder(e.data) {
		if prompt := p.SystemPrompt(); strings.Contains(prompt, "Ann") || strings.Contains(prompt, "09:00") ||
			!strings.Contains(prompt, "You are Clock. It is {{time}}") || strings.Contains(p.Cmdline, "Ann") {
			t.Errorf("a CLI was started with a message's values: %s, prompt %q", p.Cmdline, prompt)
		}
	}
	res := e.mustRun(t, withVars(newConversation(e.request(Text, "#note"), "bot/2"), "Bob", "10:30 UTC"))
	want := `note: <brainbot-context>{"user_first_name":"Bob","time":"10:30 UTC"}</brainbot-context>`
	if !res.Spare || res.Text != want {
		t.Fatalf("spare %v, %q; want the spare, told %q", res.Spare, res.Text, want)
	}
	later := withVars(follow(newConversation(e.request(Text, ""), "bot/2"), res, "#note"), "Bob", "10:31 UTC")
	if res = e.mustRun(t, later); !res.Warm || !strings.Contains(res.Text, `"time":"10:31 UTC"`) {
		t.Errorf("warm follow-up: warm %v, %q; want the new time", res.Warm, res.Text)
	}
	plain := e.request(Text, "#note")
	if res = e.mustRun(t, plain); res.Text != "note: none" {
		t.Errorf("a prompt without per-message variables: %q, want no note", res.Text)
	}
}

// A request of the bot's conversations with another shape (an edited
// brain) replaces the bot's spares: the old ones end, and only the new
// shape's spare serves the next new conversation.
func TestSparesFollowTheBrain(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4, Spares: 1})
	req := newConversation(e.request(Text, "hello"), "bot/1")
	first := e.mustRun(t, req)
	waitSpares(t, e.d, readySpares(1))
	old := cliSessions(e.data)
	delete(old, first.SessionID)

	edited := follow(req, first, "after the edit")
	edited.SystemPrompt = "You are an edited test bot."
	if res := e.mustRun(t, edited); res.Text != "You said: after the edit (message 2)" {
		t.Fatalf("after the edit: %q", res.Text)
	}
	waitSpares(t, e.d, readySpares(1))
	waitEnded(t, e, old)
	// Of no conversation, so it says nothing of the bot's brain.
	if res := e.mustRun(t, newConversation(e.request(Text, "old brain"), "")); res.Spare {
		t.Error("a request of the old shape took the new shape's spare")
	}
	fresh := newConversation(edited, "bot/3")
	fresh.Prompt = "new brain"
	if res := e.mustRun(t, fresh); !res.Spare {
		t.Error("a new conversation of the edited brain found no spare")
	}
}

// A spare runs in its bot's folders (working directory, HOME, where its
// session is kept): a new conversation of another bot whose requests have
// the same options never takes it.
func TestSparesServeTheirBotOnly(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4, Spares: 1})
	other := newConversation(e.request(Text, ""), "")
	other.BotID = "other"
	if err := e.d.KeepSpares("other", other, 1); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, e.d, readySpares(1))
	if res := e.mustRun(t, newConversation(e.request(Text, "mine"), "test/1")); res.Spare {
		t.Fatalf("bot test's conversation was served by bot other's spare (session %s)", res.SessionID)
	}
	// Each bot's CLIs, as an admin's /status shows them.
	if warm, spares := e.d.CLIsOf("other"); warm != 0 || spares != 1 {
		t.Errorf("bot other keeps %d warm and %d spare CLIs, want its one spare", warm, spares)
	}
	if warm, _ := e.d.CLIsOf("test"); warm != 1 {
		t.Errorf("bot test keeps %d warm CLIs, want its conversation's", warm)
	}
}

// A spare that died is never handed a message: noticed, it is replaced;
// asked for at once, the request still runs elsewhere.
func TestDeadSpareIsNeverUsed(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4, Spares: 1})
	first := e.mustRun(t, newConversation(e.request(Text, "hello"), "bot/1"))
	kill := func() string {
		waitSpares(t, e.d, readySpares(1))
		for session, pid := range cliSessions(e.data) {
			if session != first.SessionID {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				return session
			}
		}
		t.Fatal("no spare running")
		return ""
	}

	killed := kill()
	waitSpares(t, e.d, func(s SpareStats) bool { return s.Failed == 1 })
	res := e.mustRun(t, newConversation(e.request(Text, "after the kill"), "bot/2"))
	if res.SessionID == killed || res.Text != "You said: after the kill" {
		t.Fatalf("after the kill: session %s (the dead spare's %s), %q", res.SessionID, killed, res.Text)
	}

	killed = kill() // and ask before the driver may have noticed
	res = e.mustRun(t, newConversation(e.request(Text, "at once"), "bot/3"))
	if res.SessionID == killed || res.Text != "You said: at once" {
		t.Fatalf("asked at once: session %s (the dead spare's %s), %q", res.SessionID, killed, res.Text)
	}
}

// A spare whose CLI never gets through its start-up (it never reaches the
// tool server) is taken for hung, ended and replaced, and never handed a
// message: a new conversation starts a CLI of its own.
func TestHungSpareIsNeverUsed(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4, Spares: 1, SpareStart: 200 * time.Millisecond})
	e.d.cfg.Env = append(e.d.cfg.Env, claudetest.NoConnectEnv+"=1")
	first := e.mustRun(t, newConversation(e.request(Text, "hello"), "bot/1"))
	waitSpares(t, e.d, func(s SpareStats) bool { return s.Failed >= 1 })
	spares := cliSessions(e.data)
	res := e.mustRun(t, newConversation(e.request(Text, "anyone?"), "bot/2"))
	if _, spare := spares[res.SessionID]; res.Spare || spare || res.SessionID == first.SessionID {
		t.Fatalf("served by a hung spare: spare %v, session %s", res.Spare, res.SessionID)
	}
	if s := e.d.SpareStats(); s.Taken != 0 || s.Ready != 0 {
		t.Errorf("stats %+v: a spare that never started was counted ready or taken", s)
	}
}

// Spares off: nothing is started ahead, and a new conversation whose
// session the driver names runs as before.
func TestSparesOff(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4})
	if err := e.d.KeepSpares("panel/x", newConversation(e.request(Text, ""), ""), 2); err != nil {
		t.Fatal(err)
	}
	res := e.mustRun(t, newConversation(e.request(Text, "hello"), "bot/1"))
	if res.Spare || uuid.Validate(res.SessionID) != nil {
		t.Fatalf("spare %v, session %q", res.Spare, res.SessionID)
	}
	if n := len(cliSessions(e.data)); n != 1 {
		t.Errorf("%d CLIs running, want the conversation's only", n)
	}
	if s := e.d.SpareStats(); s != (SpareStats{}) {
		t.Errorf("stats %+v with spares off", s)
	}
}

// A set kept by a caller for another shape (a panel member's turn, here
// with its own max turns) serves requests of that shape that belong to no
// conversation; DropSpares ends it.
func TestKeepSparesForAShape(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 4, Spares: 1})
	shape := e.request(Text, "")
	shape.SessionID = ""
	shape.MaxTurns = 5
	if err := e.d.KeepSpares("panel/test/2", shape, 2); err != nil {
		t.Fatal(err)
	}
	if err := e.d.KeepSpares("panel/bad", e.request(Text, ""), 1); err == nil {
		t.Error("a shape with a session was kept")
	}
	waitSpares(t, e.d, readySpares(2))
	before := cliSessions(e.data)
	turn := shape
	turn.Prompt = "comment"
	res := e.mustRun(t, turn)
	if _, started := before[res.SessionID]; !res.Spare || !started {
		t.Errorf("a request of the kept shape: spare %v, session started before it %v", res.Spare, started)
	}
	plain := e.request(Text, "no schema")
	plain.SessionID = ""
	if res := e.mustRun(t, plain); res.Spare {
		t.Error("a request of another shape took the set's spare")
	}
	e.d.DropSpares("panel/test/2")
	waitFor(t, func() bool { return len(claudetest.ProcessesUnder(e.data)) == 0 })
}

// After a restart, a conversation's process is started ahead of its next
// message with --resume: that message finds it warm. The budget bounds
// it: spares make room, other conversations' processes do not.
func TestPrewarmResume(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 2, Spares: 1})
	req := newConversation(e.request(Text, "hello"), "bot/1")
	res := e.mustRun(t, req)
	other := e.mustRun(t, newConversation(e.request(Text, "hi"), "bot/2"))
	e.d.Close() // brainbot stops: every process ends

	d, err := New(e.d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	e.d = d
	e.mustRun(t, newConversation(e.request(Text, "a new one"), "bot/3")) // the bot's spares start
	waitSpares(t, d, readySpares(1))
	next := follow(req, res, "after the restart")
	if d.HasProcess(next.Conversation) {
		t.Error("a conversation has a process before its prewarm")
	}
	if err := d.PrewarmResume(next); err != nil {
		t.Fatal(err)
	}
	if !d.HasProcess(next.Conversation) {
		t.Error("a prewarmed conversation has no process")
	}
	waitFor(t, func() bool { _, ok := cliSessions(e.data)[res.SessionID]; return ok })
	if err := d.PrewarmResume(follow(newConversation(req, "bot/2"), other, "")); !errors.Is(err, ErrNoRoom) {
		t.Errorf("a prewarm beyond Max: %v, want ErrNoRoom", err)
	}
	waitSpares(t, d, func(s SpareStats) bool { return s.Ready+s.Starting == 0 }) // ended for the prewarm
	if err := d.PrewarmResume(next); err != nil {
		t.Errorf("a second prewarm of the same conversation: %v", err)
	}
	got := e.mustRun(t, next)
	if !got.Warm || got.Text != "You said: after the restart (message 2)" {
		t.Errorf("after the prewarm: warm %v, %q; want the prewarmed process going on with the session", got.Warm, got.Text)
	}
	if err := d.PrewarmResume(e.request(Text, "not resumed")); err == nil {
		t.Error("a prewarm of a request that resumes nothing was accepted")
	}
}

// A prewarmed conversation's CLI starts below the priority of real work
// (nice +10), as a spare does: after a failover an instance prewarms every
// conversation it took, and at normal priority they took the CPUs from the
// messages being answered. Its next message raises it back as soon as it
// waits for a slot (Expect), where this process may lower a nice value.
func TestAPrewarmedConversationYieldsUntilItsMessage(t *testing.T) {
	e, next, pid, own := prewarmedAfterAMove(t)
	if got, want := niceOf(t, pid), min(own+reaper.LowNice, 19); got != want {
		t.Errorf("the prewarmed CLI runs at nice %d, want %d (the conversations' CLIs: %d)", got, want, own)
	}
	e.d.Expect(next.Conversation)
	if mayRaise(t, own) {
		waitFor(t, func() bool { return niceOf(t, pid) == own })
	}
	if got := e.mustRun(t, next); !got.Warm {
		t.Fatalf("the message after the prewarm did not find its process warm")
	}
}

// A prewarmed process a message takes without Expect first (a caller
// that does not tell) is raised by the message's run.
func TestAPrewarmedConversationIsRaisedByItsRun(t *testing.T) {
	e, next, pid, own := prewarmedAfterAMove(t)
	if got := e.mustRun(t, next); !got.Warm {
		t.Fatalf("the message after the prewarm did not find its process warm")
	}
	if mayRaise(t, own) {
		waitFor(t, func() bool { return niceOf(t, pid) == own })
	}
}

// prewarmedAfterAMove answers a conversation's first message, ends its
// process (the conversation moved away and back) and prewarms it: the
// conversation's next request, the prewarmed process and the nice value
// of the conversations' CLIs.
func prewarmedAfterAMove(t *testing.T) (e *fakeEnv, next Request, pid, own int) {
	e = newFakeEnvWith(t, func(c *Config) { c.Warm = WarmConfig{Max: 4} })
	req := newConversation(e.request(Text, "hello"), "bot/1")
	res := e.mustRun(t, req)
	own = niceOf(t, cliSessions(e.data)[res.SessionID])
	e.d.End(req.Conversation)
	waitFor(t, func() bool { _, ok := cliSessions(e.data)[res.SessionID]; return !ok })
	next = follow(req, res, "after the move")
	if err := e.d.PrewarmResume(next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { pid = cliSessions(e.data)[res.SessionID]; return pid != 0 })
	return e, next, pid, own
}

// mayRaise reports whether this process may bring a CLI back to nice
// own; if not, the test says the raise goes unchecked.
func mayRaise(t *testing.T, own int) bool {
	var rlimit unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NICE, &rlimit); err != nil {
		t.Fatal(err)
	}
	if unix.Geteuid() != 0 && 20-int(rlimit.Cur) > own {
		t.Log("no lowering a nice value here: the raise is not checked")
		return false
	}
	return true
}

// A spare is started from its set's shape: every option the spawn reads
// must be in it, or the spare's process differs from the requests it
// serves and is never warm for their conversations' next messages.
func TestSpareShapeKeepsWhatTheSpawnReads(t *testing.T) {
	e := newFakeEnv(t)
	req := Request{
		Mode: Text, Prompt: "hello", SystemPrompt: "Be {{bot_name}}", PromptVars: map[string]string{"bot_name": "Nora"},
		Model: "haiku", BotID: "nora", MCPServers: map[string]MCPServer{"notes": {Command: "notes"}},
		AllowedTools: []string{"mcp__notes"}, ToolTimeout: time.Minute, MaxTurns: 3, MaxBudgetUSD: 0.5,
		Questions: true, Conversation: "nora/1/0", MessageID: "m1",
	}
	if got, want := e.d.fingerprint(shapeOf(req)), e.d.fingerprint(req); got != want {
		t.Errorf("a spare of the request's shape is started as\n%q\nthe request wants\n%q", got, want)
	}
}

// cliStarts is how many CLIs the driver started ahead of or for new
// conversations so far: its spares, and the new conversations that found
// none.
func cliStarts(d *Driver) uint64 {
	s := d.SpareStats()
	return s.Started + s.Missed
}

// botShapes are the shapes of bot test's new conversations: its own, with
// the question tool, and a guest answer's, without (Questions false).
func botShapes(e *fakeEnv) (own, guest Request) {
	own = newConversation(e.request(Text, ""), "")
	own.Questions = true
	guest = own
	guest.Questions = false
	return own, guest
}

// Guest answers (the bot's requests without the question tool)
// interleaved with its new conversations: each one, but the first guest
// answer, that comes once the last one's replacement got ready is served
// by a spare: the guest answers get a set of their own beside the bot's
// rather than replacing it, and the log says so, not that the brain was
// edited. One CLI starts per request, and one more: the guests' set's
// first spare.
func TestGuestAnswersKeepTheBotsSpares(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 10, Spares: 1})
	own, guest := botShapes(e)
	if err := e.d.KeepSpares("test", own, 1); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, e.d, readySpares(1))
	before := cliStarts(e.d)
	steps := []struct {
		what        string
		shape       Request
		spare       bool
		readyAfter  int
		startedThen uint64
	}{
		{"a new conversation", own, true, 1, 1},
		{"the first guest answer", guest, false, 2, 2},
		{"a new conversation after a guest answer", own, true, 2, 1},
		{"a second guest answer", guest, true, 2, 1},
		{"a new conversation", own, true, 2, 1},
		{"a third guest answer", guest, true, 2, 1},
	}
	want := before
	for i, step := range steps {
		req := step.shape
		req.Conversation, req.Prompt = fmt.Sprintf("test/%d", i), "hello"
		if res := e.mustRun(t, req); res.Spare != step.spare {
			t.Errorf("%s: spare %v, want %v", step.what, res.Spare, step.spare)
		}
		waitSpares(t, e.d, readySpares(step.readyAfter))
		want += step.startedThen
	}
	if got := cliStarts(e.d); got != want {
		t.Errorf("%d CLIs started for %d requests, want %d", got-before, len(steps), want-before)
	}
	if replaced := e.logs.FilterMessageSnippet("spares replaced"); replaced.Len() != 0 {
		t.Errorf("a guest answer replaced the bot's spares: %q", replaced.All()[0].Message)
	}
	kept := e.logs.FilterMessageSnippet("spares kept for another shape").All()
	if len(kept) != 1 || fmt.Sprint(kept[0].ContextMap()["differs"]) != "[questions]" {
		t.Errorf("log lines %v; want one saying the guests' shape differs in its questions", kept)
	}
}

// An edited brain still replaces the spares of every shape of the bot's:
// its own and its guest answers'; the log blames the edit.
func TestEditedBrainReplacesEveryShape(t *testing.T) {
	e := newWarmEnv(t, WarmConfig{Max: 10, Spares: 1})
	own, guest := botShapes(e)
	if err := e.d.KeepSpares("test", own, 1); err != nil {
		t.Fatal(err)
	}
	req := guest
	req.Conversation, req.Prompt = "test/guest", "hello"
	first := e.mustRun(t, req)
	waitSpares(t, e.d, readySpares(2))
	old := cliSessions(e.data)
	delete(old, first.SessionID)

	own.SystemPrompt = "You are an edited test bot."
	if err := e.d.KeepSpares("test", own, 1); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, e.d, readySpares(1))
	waitEnded(t, e, old)
	if n := e.logs.FilterMessageSnippet("spares replaced: an edited brain").Len(); n != 2 {
		t.Errorf("%d log lines blame an edited brain, want one for each of the old sets", n)
	}
	req = own
	req.Conversation, req.Prompt = "test/new", "edited?"
	if res := e.mustRun(t, req); !res.Spare {
		t.Error("a new conversation of the edited brain found no spare")
	}
}

// idleCPUs stands in for the cpuGauge: tests do not depend on what else
// the machine runs.
func idleCPUs() bool { return false }

// niceOf is the nice value of process pid, as the kernel says.
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	nice, err := reaper.Nice(pid)
	if err != nil {
		t.Fatal(err)
	}
	return nice
}

// A spare yields to real work: the pool asks Config.Waiting, and none
// starts while a request waits for a Claude slot (the policy is tested in
// package pool); once none waits, it starts, below the priority of the
// conversations' CLIs (nice +10), and is raised back once a conversation
// takes it.
func TestSparesYieldToWaitingRequests(t *testing.T) {
	var waiting atomic.Int64
	waiting.Store(1)
	asked := make(chan struct{})
	e := newFakeEnvWith(t, func(c *Config) {
		c.Warm = WarmConfig{Max: 4, Spares: 1}
		c.Waiting = func() int {
			select {
			case <-asked:
			default:
				close(asked)
			}
			return int(waiting.Load())
		}
	})
	first := e.mustRun(t, newConversation(e.request(Text, "hello"), "bot/1"))
	select {
	case <-asked: // by tend, about to start the bot's first spare
	case <-time.After(time.Minute):
		t.Fatal("the pool never asked whether requests wait")
	}
	if s := e.d.SpareStats(); s.Started != 0 || s.Starting != 0 {
		t.Fatalf("spares %+v while a request waits for a slot, want none started", s)
	}
	waiting.Store(0)
	waitSpares(t, e.d, readySpares(1))
	own := niceOf(t, cliSessions(e.data)[first.SessionID])
	for session, pid := range cliSessions(e.data) {
		if session != first.SessionID {
			if got, want := niceOf(t, pid), min(own+reaper.LowNice, 19); got != want {
				t.Errorf("the spare runs at nice %d, want %d (the conversation's CLI: %d)", got, want, own)
			}
		}
	}
	// Taken, it is raised back, where this process may lower a nice value.
	res := e.mustRun(t, newConversation(e.request(Text, "hi"), "bot/2"))
	if !res.Spare {
		t.Log("no spare served the conversation: its raise is not checked")
		return
	}
	if mayRaise(t, own) {
		waitFor(t, func() bool { return niceOf(t, cliSessions(e.data)[res.SessionID]) == own })
	}
}

// A new conversation that waits for a spare still starting waits for
// real work: the spares it waits for are raised back to brainbot's CPU
// priority at once, not left to start below the requests they keep
// waiting (here the spare never gets through its start, and the
// conversation starts a CLI of its own once the wait is not worth it).
func TestSparesARequestWaitsForAreRaised(t *testing.T) {
	if !mayRaise(t, 0) {
		t.Skip("this process may not lower a nice value to 0")
	}
	e := newWarmEnv(t, WarmConfig{Max: 4, Spares: 1, SpareStart: 10 * time.Second})
	first := e.mustRun(t, newConversation(e.request(Text, "hello"), "bot/1"))
	own := niceOf(t, cliSessions(e.data)[first.SessionID])
	// The first spare starts as usual; the next ones never get through
	// their start. On a busy machine the first may start late: the
	// setting changes once it is ready, not before.
	waitSpares(t, e.d, readySpares(1))
	e.d.cfg.Env = append(e.d.cfg.Env, claudetest.NoConnectEnv+"=1")
	res := e.mustRun(t, newConversation(e.request(Text, "hi"), "bot/2"))
	if !res.Spare {
		t.Fatal("the second conversation did not take the spare")
	}
	// Its replacement: counted as starting once it was started, which a
	// busy machine may make take a while after its process is there.
	waitSpares(t, e.d, func(s SpareStats) bool { return s.Starting == 1 })
	var hung int
	for session, pid := range cliSessions(e.data) {
		if session != first.SessionID && session != res.SessionID {
			hung = pid
		}
	}
	if hung == 0 {
		t.Fatal("no process of the starting spare")
	}
	if got := niceOf(t, hung); got != min(own+reaper.LowNice, 19) {
		t.Fatalf("the starting spare runs at nice %d, want %d", got, min(own+reaper.LowNice, 19))
	}
	e.mustRun(t, newConversation(e.request(Text, "anyone?"), "bot/3"))
	// Raised in the background (it reads /proc): soon, not by the time the
	// request is answered.
	waitFor(t, func() bool { return niceOf(t, hung) == own })
}
