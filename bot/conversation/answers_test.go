package conversation

// What goes under and around an answer at the ports: buttons and what the
// state keeps of them, the stop buttons, /panel through the panels' port,
// the pipeline as the panels' port, and the answers given beside the queue.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/bot/panel/host"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/state"
	"brainbot/sysprompt"
	"brainbot/toolspec"
)

// buttonsID is the id of the buttons whose callback data is data.
func buttonsID(t *testing.T, data string) string {
	t.Helper()
	id, _, ok := parseCallbackData(data)
	if !ok {
		t.Fatalf("button data %q is not ours", data)
	}
	return id
}

// A question the model asks goes out under its options, kept first with
// the message it went out under; answered in words by the next message,
// it is closed and its buttons go.
func TestQuestionButtons(t *testing.T) {
	k := newKit(t, "")
	ctx := context.Background()
	k.agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		if !req.Questions {
			return nil, errors.New("asked without the question tool")
		}
		args, _ := json.Marshal(toolspec.QuestionArgs{Question: "Tea or coffee?", Options: []string{"Tea", "Coffee"}})
		return &claude.Result{Text: "Let me ask.", Answered: true, SessionID: "session-1", ToolCalls: []claude.ToolCall{{
			Server: toolspec.QuestionServer, Tool: toolspec.QuestionToolName, Input: args, Outcome: claude.ToolOK,
			TextBefore: "Let me ask."}}}, nil
	}
	k.serve(k.private("what should I drink?"))
	k.want("out", `attach ["Tea" "Coffee"]`, `text "Let me ask.\n\nTea or coffee?" formatted=true`)
	if len(k.chats.buttons) != 2 {
		t.Fatalf("buttons %q", k.chats.buttons)
	}
	id := buttonsID(t, k.chats.buttons[0])
	b, ok, err := k.store.LookupButtons(ctx, id)
	if err != nil || !ok || b.Kind != state.ButtonsQuestion || b.User != kitUser || b.MessageID != 1 ||
		!slices.Equal(b.Options, []string{"Tea", "Coffee"}) {
		t.Fatalf("kept %+v, %v, %v; want the question under message 1", b, ok, err)
	}

	k.agent.answer = nil
	k.serve(k.private("tea, please"))
	if out := k.ev.Of("out"); len(out) != 4 || out[2] != "drop buttons 1" {
		t.Errorf("sent %q, want the question's buttons dropped first", out)
	}
	if used, err := k.store.UseButtons(ctx, id, 99); used || err != nil {
		t.Errorf("a tap on the answered question was taken: %v, %v", used, err)
	}
}

// A private chat's streamed answer shows as a draft; its stop button
// stops the turn, and what was written so far is kept as a real message.
func TestDraftStopButtonKeepsWhatWasWritten(t *testing.T) {
	k, started := runningKit(t, "")
	k.brain.Stream, k.chats.drafts = true, true
	in := k.private("write a long story")
	done := k.serveAsync(in)
	req := <-started
	req.OnText("Half an")
	press := k.private("")
	press.Kind, press.DraftID = message.StopPressed, k.chats.draft
	k.p.Stop(context.Background(), press)
	<-done

	// The press cancels the draft; the partial answer replaces it.
	k.want("out", fmt.Sprintf("stream draft=%d", press.DraftID), `shows "Half an"`, "stream cancelled", "stream finished",
		`text "Half an answ" formatted=true`, "stream cancelled")
	if k.ev.Index("agent: interrupt "+in.Key.String()) < 0 {
		t.Error("the turn was not interrupted")
	}
	if got := k.outcome(in.RequestID); got != "stopped" {
		t.Errorf("outcome %q", got)
	}
	if got := k.outcome(press.RequestID); got != "stop" {
		t.Errorf("the press's outcome %q", got)
	}

	late := k.private("")
	late.Kind, late.DraftID = message.StopPressed, press.DraftID
	k.p.Stop(context.Background(), late)
	if got := k.outcome(late.RequestID); got != "ignored" {
		t.Errorf("a press after the answer: outcome %q", got)
	}
}

// A group has no drafts: its streamed answer goes out with ⏹ under it
// for the asker, closed once the turn is over.
func TestGroupStopButtonClosesWithTheTurn(t *testing.T) {
	k := newKit(t, "")
	k.brain.Stream = true
	k.serve(k.inGroup(kitUser, "Ann", "hello"))
	k.want("out", `attach ["⏹ Stop"]`, "stream draft=0", "stream finished", `text "Hello, Ann." formatted=true`,
		"stream cancelled")
	b, ok, err := k.store.LookupButtons(context.Background(), buttonsID(t, k.chats.buttons[0]))
	if err != nil || !ok || b.Kind != state.ButtonsStop || b.User != kitUser {
		t.Fatalf("kept %+v, %v, %v", b, ok, err)
	}
	if used, _ := k.store.UseButtons(context.Background(), b.ID, 99); used {
		t.Error("⏹ still stops after the turn")
	}
}

// /panel is the panels' to answer; the request sends what they say.
func TestPanelCommandThroughThePanelsPort(t *testing.T) {
	for _, c := range []struct {
		name, outcome, reply string
		err                  error
		out                  []string
	}{
		{"started", "panel", "", nil, nil},
		{"told", "busy", "A panel is already running.", nil, []string{`notice to 7 "A panel is already running."`}},
		{"failed", "panel", "", errors.New("database is locked"), []string{`text "Something broke." formatted=false`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t, "messages:\n  error: Something broke.\n")
			k.panels.start = func() (string, string, error) { return c.outcome, c.reply, c.err }
			in := k.inGroup(kitUser, "Ann", "/panel tea?")
			k.serve(in)
			k.want("out", c.out...)
			k.want("agent")
			want := c.outcome
			if c.err != nil {
				want = "error"
			}
			if got := k.outcome(in.RequestID); got != want {
				t.Errorf("outcome %q, want %q", got, want)
			}
		})
	}
}

// The pipeline as the panels see it: Admit looks at the limits without
// counting, Charge counts, Ask runs a member's turn in a session the
// agent names with the group seeing it at work and records its usage,
// Spent records speech.
func TestPipelineAsThePanelsPort(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "limits:\n  per_user_per_day: 1\nmessages:\n  limit: Enough for today.\n")
	if outcome, reply, err := k.p.PanelPort().Admit(ctx, k.brain, kitBot, kitUser, k.p.log); outcome != "" || reply != "" || err != nil {
		t.Errorf("admitted %q, %q, %v", outcome, reply, err)
	}
	if err := k.p.PanelPort().Charge(ctx, kitBot, kitUser); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if outcome, reply, err := k.p.PanelPort().Admit(ctx, k.brain, kitBot, kitUser, k.p.log); outcome != "limited" ||
			reply != "Enough for today." || err != nil {
			t.Errorf("over the limit: %q, %q, %v", outcome, reply, err)
		}
	}
	if n, _ := k.store.DailyCount(ctx, kitBot, kitUser, time.Now()); n != 1 {
		t.Errorf("daily count %d, want 1: Admit counted", n)
	}

	q := host.Question{Bot: kitBot, Brain: k.brain, Run: "run-1", Chat: kitGroup, User: kitUser, UserName: "Ann",
		Prompt: "Tea or coffee?", Speak: true, Log: k.p.log}
	res, err := k.p.PanelPort().Ask(ctx, q)
	if err != nil || res.Text != "Hello, Ann." {
		t.Fatalf("asked: %+v, %v", res, err)
	}
	req := k.agent.requests()[0]
	if req.Prompt != q.Prompt || req.SessionID != "" || req.Resume || req.PromptVars[sysprompt.UserFirstName] != "Ann" ||
		req.PromptVars[sysprompt.ChatType] != "supergroup" {
		t.Errorf("member's turn asked as %+v", req)
	}
	k.want("action", string(message.RecordVoice))
	k.p.PanelPort().Spent(ctx, q, 0.015)
	u := k.usage()
	if len(u) != 1 || u[0].Mode != "panel" || u[0].Requests != 2 || u[0].ClaudeUSD != 0.02 || u[0].OpenAIUSD != 0.015 {
		t.Errorf("usage %+v, want the turn and its speech under panel", u)
	}
}

// A message begun twice already gets "please send it again" beside the
// queue, unless a newer delivery answers it.
func TestResend(t *testing.T) {
	k := newKit(t, "")
	in := k.private("hello")
	k.p.Resend(context.Background(), in)
	k.want("out", fmt.Sprintf("notice to 7 %q", ResendText))
	k.want("progress", "attempt text", "answered", "finish keep=false")

	k = newKit(t, "")
	in = k.private("hello")
	progressOf(in).markErr = map[string]error{"attempt": state.ErrSuperseded}
	k.p.Resend(context.Background(), in)
	k.want("out")
	if got := k.outcome(in.RequestID); got != "superseded" {
		t.Errorf("outcome %q", got)
	}
}

// A daily counter the state cannot reach pauses the message before it is
// charged; one it refuses otherwise is the brain's error text.
func TestDailyCounterRefused(t *testing.T) {
	for _, c := range []struct {
		err     error
		out     []string
		outcome string
		keep    bool
	}{
		{state.Unavailable("nats", errors.New("timeout")), nil, "paused", true},
		{errors.New("disk I/O error"), []string{`text "Something broke." formatted=false`}, "error", false},
	} {
		k := newKit(t, "limits:\n  per_user_per_day: 5\nmessages:\n  error: Something broke.\n")
		k.store.refuse("TakeDaily", c.err)
		in := k.private("hello")
		k.serve(in)
		k.want("out", c.out...)
		k.want("progress", fmt.Sprintf("finish keep=%v", c.keep))
		if got := k.outcome(in.RequestID); got != c.outcome {
			t.Errorf("%v: outcome %q, want %q", c.err, got, c.outcome)
		}
		if strings.Contains(strings.Join(k.ev.All(), "\n"), "agent: run") {
			t.Errorf("%v: the model ran", c.err)
		}
	}
}
