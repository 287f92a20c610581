package main

import (
	"bufio"
	"cmp"
	"context"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/state/jetstream/natstest"
)

// clockBrain's prompt uses per-message variables: a spare is started
// before their values are known.
const clockBrain = `name: Clock
telegram:
  token_env: CLOCK_TOKEN
system_prompt: You are a clock. Greet {{user_first_name}}; it is {{time}}.
`

// spareStack runs brainbot with the clock brain alone, spares on as by
// default, and env.
func spareStack(t testing.TB, env ...string) *stack.Stack {
	t.Helper()
	return stackOf(t, map[string]string{"clock.yaml": clockBrain}, nil, append([]string{"BRAINBOT_GRACE=20s"}, env...))
}

// stackOf runs brainbot with brains and panels (file name → YAML) and
// env, its admin endpoint on.
func stackOf(t testing.TB, brains, panels map[string]string, env []string) *stack.Stack {
	t.Helper()
	return startStack(t, stack.Config{
		Brainbot:  brainbotBinary(t),
		ClaudeCmd: claudetest.RequireCLI(t),
		Dir:       t.TempDir(),
		Brains:    brains,
		Panels:    panels,
		Env:       append([]string{"BRAINBOT_HTTP_ADDR=127.0.0.1:0"}, env...),
		Logs:      testLogs(t),
	}, nil)
}

// inBothModes runs test against brainbot with the clock brain, alone and
// as an instance of a cluster.
func inBothModes(t *testing.T, test func(*testing.T, *stack.Stack)) {
	eachMode(t, func(t *testing.T, env []string) { test(t, spareStack(t, env...)) })
}

// eachMode runs test for brainbot alone and as an instance of a cluster
// (a nats-server of the test's own): env is brainbot's extra environment
// in that mode.
func eachMode(t *testing.T, test func(t *testing.T, env []string)) {
	t.Run("embedded", func(t *testing.T) { test(t, nil) })
	t.Run("cluster", func(t *testing.T) {
		test(t, []string{"BRAINBOT_NATS_URL=" + natstest.Start(t), "BRAINBOT_NATS_PARTITIONS=4"})
	})
}

// clis maps the session of each Claude CLI brainbot runs whose system
// prompt (its --system-prompt-file) holds marker to its pid: what the
// operating system says was started, and for which session.
func clis(s *stack.Stack, marker string) map[string]int {
	sessions := map[string]int{}
	for _, p := range claudetest.ProcessesUnder(s.DataDir) {
		session := cmp.Or(p.Flag("--session-id"), p.Flag("--resume"))
		if session != "" && strings.Contains(p.SystemPrompt(), marker) {
			sessions[session] = p.PID
		}
	}
	return sessions
}

// metric is the value of one sample of brainbot's /metrics, e.g.
// `brainbot_claude_spares{state="ready"}` (0 when it has none).
func metric(t testing.TB, s *stack.Stack, sample string) float64 {
	t.Helper()
	lines := s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "admin endpoint listening" })
	if len(lines) == 0 {
		t.Fatal("no admin endpoint log line")
	}
	resp, err := http.Get("http://" + lines[len(lines)-1].Str("addr") + "/metrics") // the running brainbot's
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if value, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// waitMetrics waits until brainbot's metrics satisfy cond.
func waitMetrics(t testing.TB, s *stack.Stack, what string, cond func(get func(sample string) float64) bool) {
	t.Helper()
	get := func(sample string) float64 { return metric(t, s, sample) }
	for deadline := time.Now().Add(waitLong); !cond(get); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
	}
}

// waitReadySpares waits until brainbot has n spares or more ready (a set
// that missed new conversations grows) and none starting.
func waitReadySpares(t testing.TB, s *stack.Stack, n int) {
	t.Helper()
	waitMetrics(t, s, strconv.Itoa(n)+" spares ready", func(get func(string) float64) bool {
		return get(`brainbot_claude_spares{state="ready"}`) >= float64(n) && get(`brainbot_claude_spares{state="starting"}`) == 0
	})
}

// sessionOf is the session the driver last ran user's request in, as it
// logged it.
func sessionOf(t *testing.T, s *stack.Stack, user int64) string {
	t.Helper()
	lines := s.Logs().Find(0, func(l stack.Line) bool {
		return strings.HasPrefix(l.Msg, "claude request") && l.Int("user") == user && l.Str("session") != ""
	})
	if len(lines) == 0 {
		t.Fatalf("no claude request logged for user %d", user)
	}
	return lines[len(lines)-1].Str("session")
}

// waitCLIs waits until the CLIs whose prompt holds marker satisfy cond,
// and returns them.
func waitCLIs(t testing.TB, s *stack.Stack, marker, what string, cond func(map[string]int) bool) map[string]int {
	t.Helper()
	for deadline := time.Now().Add(waitLong); ; time.Sleep(50 * time.Millisecond) {
		now := clis(s, marker)
		if cond(now) {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %s: CLIs %v", what, now)
		}
	}
}

// modelSaw is the model's request for the user's text: the system prompt
// it got and the text blocks of the user's message.
func modelSaw(t *testing.T, s *stack.Stack, text string) (system string, blocks []string) {
	t.Helper()
	for _, r := range s.Model.Requests() {
		for _, m := range r.Messages {
			var texts []string
			for _, b := range m.Content {
				if m.Role == "user" && b.Type == "text" {
					texts = append(texts, b.Text)
				}
			}
			if len(texts) > 0 && texts[len(texts)-1] == text {
				return r.System, texts
			}
		}
	}
	t.Fatalf("the model never got %q", text)
	return "", nil
}

// askNew sends user's first message to the clock and checks it was served
// by a spare: a process that was running before the message. It returns
// the conversation's session.
func askNew(t *testing.T, s *stack.Stack, user int64, text, marker string) string {
	t.Helper()
	before := clis(s, marker)
	r := ask(t, s, "clock", user, text)
	if got, want := wantText(t, r), "You said: "+text+" (message 1)"; got != want {
		t.Fatalf("reply %q, want %q", got, want)
	}
	session := sessionOf(t, s, user)
	if _, started := before[session]; !started || r.Summary.Fields["spare"] != true {
		t.Fatalf("user %d's first message ran in session %s (spare %v); want one of the processes started before it: %v",
			user, session, r.Summary.Fields["spare"], before)
	}
	return session
}

// The first message of a new conversation is served by a spare — a CLI
// started before the message, whose session becomes the conversation's —
// with the message's own values of the prompt's variables; the spare is
// replaced; the conversation goes on warm in its process; a killed spare
// is never handed a message; an edited brain replaces the spares. In one
// process, and in a cluster.
func TestEndToEndSpares(t *testing.T) { inBothModes(t, testSpares) }

func testSpares(t *testing.T, s *stack.Stack) {
	const marker = "You are a clock."
	waitReadySpares(t, s, 1)
	first := askNew(t, s, 801, "what time is it", marker)
	system, blocks := modelSaw(t, s, "what time is it")
	if !strings.Contains(system, "Greet {{user_first_name}}; it is {{time}}.") || len(blocks) != 2 ||
		!strings.HasPrefix(blocks[0], `<brainbot-context>{"user_first_name":"User801","time":"`) {
		t.Errorf("the model got the system prompt %q and the message %q; want placeholders, and the values in a note before the words", system, blocks)
	}
	conversations := map[string]bool{first: true}

	// Replaced: a new spare, started after the message.
	waitReadySpares(t, s, 1)
	spares := func() map[string]int {
		now := clis(s, marker)
		maps.DeleteFunc(now, func(session string, _ int) bool { return conversations[session] })
		return now
	}
	if len(spares()) != 1 {
		t.Fatalf("spares %v after the first conversation took one, want its replacement", spares())
	}
	r := ask(t, s, "clock", 801, "and now")
	if got := wantText(t, r); got != "You said: and now (message 2)" || r.Summary.Fields["warm"] != true || sessionOf(t, s, 801) != first {
		t.Errorf("follow-up %q, warm %v: want the conversation going on in its process", got, r.Summary.Fields["warm"])
	}

	// A killed spare is never handed a message.
	var killed string
	for session, pid := range spares() {
		killed = session
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	r = ask(t, s, "clock", 802, "after the kill")
	if got := wantText(t, r); got != "You said: after the kill (message 1)" || sessionOf(t, s, 802) == killed {
		t.Errorf("after the kill: %q in session %s, the killed spare's %s", got, sessionOf(t, s, 802), killed)
	}
	conversations[sessionOf(t, s, 802)] = true

	// An edited brain replaces the spares (the killed one's replacement
	// among them) before any message of it.
	waitReadySpares(t, s, 1)
	old := spares()
	mark := s.Logs().Len()
	if err := s.WriteBrain("clock.yaml", strings.Replace(clockBrain, "You are a clock.", "You are an EDITED clock.", 1)); err != nil {
		t.Fatal(err)
	}
	waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "brain loaded" && l.Str("bot") == "clock" })
	waitCLIs(t, s, marker, "the old spares ended", func(now map[string]int) bool {
		for session := range old {
			if _, alive := now[session]; alive {
				return false
			}
		}
		return true
	})
	waitReadySpares(t, s, 1)
	askNew(t, s, 803, "edited?", "You are an EDITED clock.")
	if system, _ := modelSaw(t, s, "edited?"); !strings.Contains(system, "You are an EDITED clock.") {
		t.Errorf("the model's system prompt %q, want the edited one", system)
	}
}

// Spares live within BRAINBOT_MAX_WARM and yield to conversations: with
// room for two processes, two warm conversations leave none for a spare
// and keep their processes, and a spare starts again once one of them
// ends (/reset).
func TestEndToEndSparesBudget(t *testing.T) {
	s := spareStack(t, "BRAINBOT_MAX_WARM=2")
	const marker = "You are a clock."
	waitReadySpares(t, s, 1)
	askNew(t, s, 811, "one", marker)
	waitReadySpares(t, s, 1) // the first conversation's process and the spare fill the budget
	askNew(t, s, 812, "two", marker)
	waitMetrics(t, s, "two warm conversations and no spare", func(get func(string) float64) bool {
		return get("brainbot_claude_warm") == 2 && get(`brainbot_claude_spares{state="ready"}`)+get(`brainbot_claude_spares{state="starting"}`) == 0
	})
	if n := len(clis(s, marker)); n != 2 {
		t.Errorf("%d CLIs running with BRAINBOT_MAX_WARM=2", n)
	}
	for i, user := range []int64{811, 812} {
		r := ask(t, s, "clock", user, "again")
		if r.Summary.Fields["warm"] != true {
			t.Errorf("conversation %d lost its process to a spare", i+1)
		}
	}
	ask(t, s, "clock", 812, "/reset")
	waitReadySpares(t, s, 1)
	waitCLIs(t, s, marker, "the first conversation's process and a spare", func(now map[string]int) bool { return len(now) == 2 })
}

// A busy bot keeps its spare beyond a full budget (issue 48): with room
// for three processes, two conversations and the spare fill it, and a
// third new conversation takes the spare. The bot's next spare then ends
// the conversation's process wanted least lately (its worth halves every
// BRAINBOT_WARM_IDLE/8), long before that idle time would end it, and
// never one just used: the next new conversation is served by a spare
// again, and the spare it took is replaced.
func TestEndToEndBusyBotKeepsItsSpare(t *testing.T) {
	s := spareStack(t, "BRAINBOT_MAX_WARM=3", "BRAINBOT_SPARES=1", "BRAINBOT_WARM_IDLE=1m")
	const marker = "You are a clock."
	waitReadySpares(t, s, 1)
	oldest := askNew(t, s, 831, "one", marker)
	waitReadySpares(t, s, 1)
	kept := askNew(t, s, 832, "two", marker)
	waitReadySpares(t, s, 1) // the budget full: two conversations and the spare
	mark := s.Logs().Len()
	askNew(t, s, 833, "three", marker)

	ended := waitLogFrom(t, s, mark, func(l stack.Line) bool {
		return l.Msg == "claude: kept CLI ended for a spare worth more: the warm-process budget is full"
	})
	if ended.Fields["spare"] != false {
		t.Errorf("%s: want a conversation's idle process ended for the spare", ended.Raw)
	}
	waitReadySpares(t, s, 1)
	now := clis(s, marker)
	if _, alive := now[oldest]; alive {
		t.Errorf("the conversation wanted least lately kept its process %s: CLIs %v", oldest, now)
	}
	if r := ask(t, s, "clock", 832, "still warm?"); r.Summary.Fields["warm"] != true || sessionOf(t, s, 832) != kept {
		t.Errorf("the second conversation lost its process: %s", r.Summary.Raw)
	}
	taken := metric(t, s, "brainbot_claude_spares_taken_total")
	askNew(t, s, 834, "four", marker)
	if got := metric(t, s, "brainbot_claude_spares_taken_total"); got != taken+1 {
		t.Errorf("spares taken %v, then %v: want the fourth conversation counted as served by a spare", taken, got)
	}
	waitReadySpares(t, s, 1)
}

// After a restart, the conversations active most recently get their
// process back before their next message: a CLI resuming the session is
// running before the message comes, and the message finds it warm. In
// one process, and in a cluster (the conversations of the partitions the
// instance owns, their transcripts restored first).
func TestEndToEndPrewarmAfterRestart(t *testing.T) { inBothModes(t, testPrewarm) }

func testPrewarm(t *testing.T, s *stack.Stack) {
	const marker = "You are a clock."
	users := []int64{821, 822, 823}
	sessions := map[int64]string{}
	for _, user := range users {
		ask(t, s, "clock", user, "before the restart")
		sessions[user] = sessionOf(t, s, user)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if code, err := s.Stop(ctx, syscall.SIGTERM); err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}
	mark := s.Logs().Len()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	line := waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "recent conversations prewarmed" })
	if line.Int("prewarmed") != int64(len(users)) {
		t.Fatalf("prewarm line %s, want the %d conversations", line.Raw, len(users))
	}
	running := waitCLIs(t, s, marker, "the conversations' processes started", func(now map[string]int) bool {
		for _, session := range sessions {
			if _, ok := now[session]; !ok {
				return false
			}
		}
		return true
	})
	for _, user := range users {
		r := ask(t, s, "clock", user, "after the restart")
		if got := wantText(t, r); got != "You said: after the restart (message 2)" || r.Summary.Fields["warm"] != true {
			t.Errorf("user %d: %q, warm %v; want the conversation going on in the process started before", user, got, r.Summary.Fields["warm"])
		}
		if session := sessionOf(t, s, user); running[session] == 0 || session != sessions[user] {
			t.Errorf("user %d ran in session %s, want its own %s", user, session, sessions[user])
		}
	}
}

// A panel's members answer in processes started before the /panel
// message: every turn of the demo panel runs in a spare of its member's.
func TestEndToEndPanelOnSpares(t *testing.T) {
	s := demoPanelStack(t)
	waitReadySpares(t, s, len(demoMembers)*4) // a conversation's and three panel turns' per member
	before := clis(s, "")
	const group = -100900
	mark := s.Logs().Len()
	s.SendGroupCommand(group, 90, "/panel should cities ban cars?", demoMembers...)
	line := waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "panel" && l.Int("chat") == group })
	if line.Str("outcome") != "ok" || line.Int("answers") != 3 || line.Int("comments") != 3 || line.Int("replies") != 2 {
		t.Fatalf("panel %s", line.Raw)
	}
	turns := s.Logs().Find(mark, func(l stack.Line) bool {
		return l.Msg == "claude request done" && l.Str("panel_run") == line.Str("panel_run")
	})
	if len(turns) != 8 {
		t.Fatalf("%d turns logged, want the demo's 8", len(turns))
	}
	for _, l := range turns {
		if _, started := before[l.Str("session")]; !started || l.Fields["spare"] != true {
			t.Errorf("turn %d of %s ran in session %s (spare %v), not in a process started before the panel",
				l.Int("turn"), l.Str("bot"), l.Str("session"), l.Fields["spare"])
		}
	}
}

// Guests and a panel interleaved with a bot's new conversations: each new
// conversation, and each guest answer after the first, that comes once
// the last one's spare got ready is served by a spare. A guest answer has
// another shape (no question tool): it keeps spares of its own beside the
// bot's, rather than replacing the bot's, and the log says so; a panel's
// spares give way to the bot's own when the budget is tight (here full
// with the demo's twelve spares).
func TestEndToEndSparesServeGuestsAndPanels(t *testing.T) {
	s := demoPanelStack(t, "BRAINBOT_MAX_WARM=12")
	waitReadySpares(t, s, len(demoMembers)*4)
	const bot = "chat"
	// CLI starts: the spares started, and the new conversations that
	// started a CLI of their own.
	cliStarts := func() int {
		return int(metric(t, s, "brainbot_claude_spares_started_total") + metric(t, s, "brainbot_claude_spares_missed_total"))
	}
	startsBefore, from := cliStarts(), s.Logs().Len()
	requests := 0
	// spareReady waits for the bot's next spare to get ready after mark.
	spareReady := func(mark int) {
		waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "claude: spare ready" && l.Str("spares") == bot })
	}
	user := int64(860)
	newConversation := func() {
		t.Helper()
		user++
		requests++
		mark := s.Logs().Len()
		r := ask(t, s, bot, user, "hello")
		if r.Summary.Str("outcome") != "ok" || r.Summary.Fields["spare"] != true {
			t.Errorf("new conversation of user %d: %s; want it served by a spare", user, r.Summary.Raw)
		}
		spareReady(mark)
	}
	guest := func(first bool) {
		t.Helper()
		user++
		requests++
		mark := s.Logs().Len()
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		query := s.Telegram.SummonAsGuest(stack.Token(bot), user, user+1000, "what is a haiku?")
		if _, err := s.Telegram.WaitCall(ctx, stack.Token(bot), func(c telegramtest.Call) bool {
			return c.Method == "answerGuestQuery" && c.Param("guest_query_id") == query
		}); err != nil {
			t.Fatalf("no guest answer: %v", err)
		}
		line := waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "request" && l.Int("user") == user })
		if line.Str("outcome") != "ok" || !first && line.Fields["spare"] != true {
			t.Errorf("guest answer for user %d: %s; want it served by a spare", user, line.Raw)
		}
		spareReady(mark)
		if replaced := s.Logs().Find(mark, func(l stack.Line) bool { return strings.HasPrefix(l.Msg, "claude: spares replaced") }); len(replaced) > 0 {
			t.Errorf("a guest answer replaced spares: %s", replaced[0].Raw)
		}
		kept := s.Logs().Find(mark, func(l stack.Line) bool { return strings.HasPrefix(l.Msg, "claude: spares kept for another shape") })
		if first && (len(kept) != 1 || kept[0].Str("spares") != bot || !strings.Contains(kept[0].Raw, `"differs":["questions"]`)) {
			t.Errorf("the first guest answer logged %v; want its spares kept beside the bot's, their shape differing in the question tool", kept)
		}
	}

	newConversation()
	guest(true)
	newConversation()
	guest(false)
	newConversation()
	// The bot's CLI starts: its spares, and its requests that started a
	// CLI of their own. One each, and one for the guests' spares.
	botStarts := len(s.Logs().Find(from, func(l stack.Line) bool {
		return l.Msg == "claude: spare ready" && l.Str("spares") == bot ||
			l.Msg == "request" && l.Str("bot") == bot && l.Fields["spare"] != true && l.Fields["warm"] != true
	}))
	if botStarts != requests+1 {
		t.Errorf("%d CLI starts for %d new conversations and guest answers, want %d", botStarts, requests, requests+1)
	}

	mark := s.Logs().Len()
	s.SendGroupCommand(-100870, 90, "/panel should cities ban cars?", demoMembers...)
	if line := waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "panel" && l.Int("chat") == -100870 }); line.Str("outcome") != "ok" {
		t.Fatalf("panel %s", line.Raw)
	}
	requests += 8 // the demo's turns
	for range 3 {
		newConversation()
	}
	t.Logf("%d CLI starts for %d requests (%v missed a spare)", cliStarts()-startsBefore, requests, metric(t, s, "brainbot_claude_spares_missed_total"))
}
