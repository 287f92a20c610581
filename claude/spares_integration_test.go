package claude

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap/zaptest"

	"brainbot/claude/claudetest"
	"brainbot/mcp/toolstest"
	"brainbot/sysprompt"
)

// clockPrompt uses per-message variables; withClock gives a request its
// values.
const clockPrompt = "You are {{bot_name}}. It is {{time}}; greet {{user_first_name}}."

func withClock(req Request, name, clock string) Request {
	req.SystemPrompt = clockPrompt
	req.PromptVars = sysprompt.Vars{sysprompt.BotName: "Clock", sysprompt.UserFirstName: name, sysprompt.Time: clock}
	return req
}

// lastRequestWith is the model's last request whose user's text is text.
func lastRequestWith(t *testing.T, model *claudetest.Model, text string) claudetest.Request {
	t.Helper()
	for _, r := range slices.Backward(model.Requests()) {
		if slices.Contains(userTexts([]claudetest.Request{r}), text) {
			return r
		}
	}
	t.Fatalf("the model never got %q", text)
	return claudetest.Request{}
}

// The real CLI as a spare: a new conversation is served by a process
// started before it, with the message's own values of the prompt's
// variables; the spare is replaced, a dead one is never used, an edited
// brain replaces it, and a caller's set serves its own shape (a panel
// turn's JSON schema).
func TestIntegrationSpares(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newWarmHarness(t, cli, WarmConfig{Max: 8, Spares: 1})
	first, err := h.run(withClock(newConversation(h.request(Text, "hello"), "it/1"), "Ann", "09:00 UTC"))
	if err != nil {
		t.Fatal(err)
	}
	waitSpares(t, h.driver, readySpares(1))
	before := cliSessions(h.root)

	req := withClock(newConversation(h.request(Text, "good morning"), "it/2"), "Bob", "10:30 UTC")
	res, err := h.run(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, started := before[res.SessionID]; !res.Spare || !started || res.Text != "You said: good morning (message 1)" {
		t.Fatalf("spare %v, session started before the request %v, %q; want the spare", res.Spare, started, res.Text)
	}
	got := lastRequestWith(t, h.model, "good morning")
	if !strings.Contains(got.System, "You are Clock. It is {{time}}; greet {{user_first_name}}.") || strings.Contains(got.System, "Ann") {
		t.Errorf("system prompt %q: want the bot's name and the placeholders, no message's values", got.System)
	}
	last := got.Messages[len(got.Messages)-1]
	for i := len(got.Messages) - 1; i >= 0 && got.Messages[i].Role != "user"; i-- {
		last = got.Messages[i-1]
	}
	if note := sysprompt.Note(clockPrompt, req.PromptVars); len(last.Content) == 0 || last.Content[0].Text != note {
		t.Errorf("the message's blocks %+v; want it to open with %s", last.Content, note)
	}

	// The replacement, killed: never used.
	waitSpares(t, h.driver, readySpares(1))
	var killed string
	for session, pid := range cliSessions(h.root) {
		if _, old := before[session]; !old && session != res.SessionID {
			killed = session
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	if killed == "" {
		t.Fatal("no replacement spare")
	}
	waitSpares(t, h.driver, func(s SpareStats) bool { return s.Failed == 1 })
	waitSpares(t, h.driver, readySpares(1))
	third, err := h.run(withClock(newConversation(h.request(Text, "after the kill"), "it/3"), "Cy", "11:00 UTC"))
	if err != nil || !third.Spare || third.SessionID == killed {
		t.Fatalf("after the kill: %v, spare %v, session %s (killed %s)", err, third != nil && third.Spare, third.SessionID, killed)
	}

	// An edited brain: the bot's spares are replaced.
	waitSpares(t, h.driver, readySpares(1))
	old := cliSessions(h.root)
	edited := follow(req, res, "after the edit")
	edited.SystemPrompt = "You are the edited {{bot_name}}. It is {{time}}."
	if _, err := h.run(edited); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, h.driver, readySpares(1))
	fresh := newConversation(edited, "it/4")
	fresh.Prompt = "edited?"
	if res, err := h.run(fresh); err != nil || !res.Spare {
		t.Fatalf("a new conversation of the edited brain: %v, spare %v", err, res != nil && res.Spare)
	}
	now := cliSessions(h.root)
	for session := range old {
		if _, alive := now[session]; alive && !slices.Contains([]string{first.SessionID, res.SessionID, third.SessionID}, session) {
			t.Errorf("a spare of the old brain (session %s) still runs", session)
		}
	}

	// A caller's set: a panel member's turn two, with its JSON schema.
	shape := newConversation(h.request(Text, ""), "")
	shape.JSONSchema = `{"type":"object","properties":{"target":{"type":"string","enum":["voice","painter"]},"comment":{"type":"string"}},"required":["target","comment"]}`
	if err := h.driver.KeepSpares("panel/it/2", shape, 1); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, h.driver, readySpares(2))
	turn := shape
	turn.Prompt = "whose answer do you comment on?"
	res, err = h.run(turn)
	if err != nil || !res.Spare || string(res.Structured) != `{"comment":"comment of voice","target":"voice"}` {
		t.Fatalf("a panel turn: %v, spare %v, %s", err, res != nil && res.Spare, res.Structured)
	}
}

// The budget with the real CLI: a spare is ended before a conversation's
// warm process, and starts again when there is room.
func TestIntegrationSparesBudget(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newWarmHarness(t, cli, WarmConfig{Max: 2, Spares: 1})
	if _, err := h.run(newConversation(h.request(Text, "a"), "it/a")); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, h.driver, readySpares(1))
	b, err := h.run(newConversation(h.request(Text, "b"), "it/b"))
	if err != nil || !b.Spare {
		t.Fatalf("b: %v, spare %v", err, b != nil && b.Spare)
	}
	waitSpares(t, h.driver, func(s SpareStats) bool { return s.Ready+s.Starting == 0 })
	if h.driver.Warm() != 2 {
		t.Errorf("%d warm processes, want both conversations'", h.driver.Warm())
	}
	h.driver.End("it/a")
	waitSpares(t, h.driver, readySpares(1))
}

// After a restart, the real CLI resumes a conversation ahead of its next
// message: the message is served by that process, and the session goes
// on.
func TestIntegrationPrewarmResume(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newWarmHarness(t, cli, WarmConfig{Max: 4})
	req := newConversation(h.request(Text, "remember me"), "it/1")
	res, err := h.run(req)
	if err != nil {
		t.Fatal(err)
	}
	h.driver.Close()

	log := zaptest.NewLogger(t)
	tools := toolstest.Start(t, h.data, log)
	d, err := New(Config{Command: cli, DataDir: h.data, ToolsURL: tools.URL, Tickets: tools.Tickets,
		Env: append(h.model.Env(), "HOME="+h.home), Log: log, Warm: WarmConfig{Max: 4}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	h.driver = d
	next := follow(req, res, "who am I?")
	if err := d.PrewarmResume(next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := cliSessions(h.root)[res.SessionID]; return ok })
	got, err := h.run(next)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Warm || got.Text != "You said: who am I? (message 2)" {
		t.Errorf("warm %v, %q; want the prewarmed process to go on with the session", got.Warm, got.Text)
	}
}
