package claude

import (
	"errors"
	"strings"
	"testing"
	"time"

	"brainbot/claude/claudetest"
)

// A turn interrupted while the model writes (a stop button): the request
// ends at once with ErrInterrupted, its Result holds the text written so
// far and what the partial turn cost, the process stays, and the next
// turn's history holds the partial answer.
func TestIntegrationInterruptMidAnswer(t *testing.T) {
	cli := claudetest.RequireCLI(t)
	h := newWarmHarness(t, cli, WarmConfig{Max: 2})
	h.model.SetPace(100 * time.Millisecond) // 64 bytes a tenth of a second: ~10 s for #long
	req := h.request(Text, "tell me #long")
	req.Conversation = "it/1"
	streamed := make(chan string, 1000)
	req.OnText = func(text string) {
		select {
		case streamed <- text:
		default: // read no more once the stop is pressed
		}
	}
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.run(req)
		done <- outcome{res, err}
	}()
	var shown string
	for shown = range streamed {
		if len(shown) >= 300 { // a few deltas in
			break
		}
	}
	if !h.driver.Interrupt("it/1") {
		t.Fatal("nothing to interrupt")
	}
	var got outcome
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the request did not end within 30 s of the interrupt")
	}
	if !errors.Is(got.err, ErrInterrupted) || got.res == nil {
		t.Fatalf("interrupted request: %+v, %v; want a result and ErrInterrupted", got.res, got.err)
	}
	res := got.res
	if !strings.HasPrefix(res.Text, shown[:300]) || !strings.HasPrefix(res.Text, "Paragraph 1.") {
		t.Errorf("partial text %q does not go on from what streamed (%q)", res.Text, shown)
	}
	if strings.Contains(res.Text, "Paragraph 40.") {
		t.Errorf("the whole answer came back (%d bytes): the turn was not stopped", len(res.Text))
	}
	if res.CostUSD <= 0 || res.Tokens.Input == 0 {
		t.Errorf("partial turn's usage: cost %g, tokens %+v; want both counted", res.CostUSD, res.Tokens)
	}

	h.model.SetPace(0)
	after := h.request(Text, "what did you say?")
	after.Conversation, after.SessionID, after.Resume = "it/1", res.SessionID, true
	next, err := h.run(after)
	if err != nil || !next.Warm {
		t.Fatalf("after the interrupt: %+v, %v; want an answer from the same process", next, err)
	}
	reqs := h.model.Requests()
	last := reqs[len(reqs)-1]
	var history []string
	for _, m := range last.Messages {
		for _, b := range m.Content {
			if m.Role == "assistant" {
				history = append(history, b.Text)
			}
		}
	}
	if len(history) == 0 || !strings.HasPrefix(history[0], res.Text[:100]) {
		t.Errorf("the next turn's history %q lacks the partial answer", history)
	}
}
