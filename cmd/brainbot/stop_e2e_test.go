package main

import (
	"context"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/cmd/internal/stack"
)

// The stop button of a streamed answer, with the real CLI: pressed while
// the model writes, the turn ends at once, what was written is sent as a
// real message, the partial turn's cost is in the request's line, and the
// next message is answered in the same process with the partial answer in
// the session's history.
func TestEndToEndStopButton(t *testing.T) { eachMode(t, testStopButton) }

func testStopButton(t *testing.T, env []string) {
	s, ctx := pacedStack(t, env)
	token := stack.Token("narrator")
	const user = 931
	s.Send("narrator", user, "tell me a story #long")
	draft, id := waitDraft(ctx, t, s, token, user, 300)
	if draft.Param("can_stop") != "true" {
		t.Fatalf("draft without a stop button: %v", draft.Params)
	}
	pressed := time.Now()
	s.Telegram.PressStop(token, user, id)
	summary := waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("user") == user && l.Str("outcome") == "stopped"
	})
	t.Logf("stopped %v after the press", time.Since(pressed))
	calls := s.ChatCalls("narrator", user)
	if len(calls) != 1 || calls[0].Method != "sendMessage" {
		t.Fatalf("after the stop: %d calls, want the one message with what was written", len(calls))
	}
	kept := stack.Rendered(calls[0])
	if !strings.HasPrefix(kept, "Paragraph 1.") || strings.Contains(kept, "Paragraph 40.") || len(kept) < 300 {
		t.Errorf("kept %d characters %.80q...: want the start of the answer, not all of it", len(kept), kept)
	}
	if summary.Float("cost_usd") <= 0 || summary.Int("input_tokens") == 0 {
		t.Errorf("the stopped request's line has cost %g, input tokens %d: want the partial turn's usage",
			summary.Float("cost_usd"), summary.Int("input_tokens"))
	}
	waitLogFrom(t, s, 0, func(l stack.Line) bool { return l.Msg == "turn stopped by the stop button" })

	s.Model.SetPace(0)
	s.Send("narrator", user, "what did you say?")
	next := waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("user") == user && l.Str("outcome") == "ok"
	})
	if warm, _ := next.Fields["warm"].(bool); !warm {
		t.Error("the next message did not run in the same CLI process")
	}
	reqs := s.Model.Requests()
	var history string
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, b := range m.Content {
			if m.Role == "assistant" {
				history += b.Text
			}
		}
	}
	if !strings.Contains(history, "Paragraph 1.") {
		t.Errorf("the next turn's history lacks the partial answer: %.200q", history)
	}
}

// A voice reply's draft says what is being made and carries the stop
// button: pressed while the model writes, the request ends, the speech
// already under way is stopped, and no voice note is made or sent; what
// OpenAI spoke before the stop is billed and counted.
func TestEndToEndStopButtonEndsAVoiceReply(t *testing.T) { eachMode(t, testStopButtonEndsAVoiceReply) }

func testStopButtonEndsAVoiceReply(t *testing.T, env []string) {
	s, ctx := pacedStack(t, env)
	token := stack.Token("speaker")
	const user = 932
	s.Send("speaker", user, "read me a story #long")
	draft, id := waitDraft(ctx, t, s, token, user, 0)
	if draft.Param("can_stop") != "true" || !strings.Contains(draft.Param("text"), "voice message") {
		t.Fatalf("draft %v: want a note of the voice message with a stop button", draft.Params)
	}
	// The answer is spoken while it is written: stopped once a part of it is.
	waitLogFrom(t, s, 0, func(l stack.Line) bool { return l.Msg == "speech part made" })
	s.Telegram.PressStop(token, user, id)
	summary := waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("user") == user && l.Str("mode") == "speech"
	})
	if summary.Str("outcome") != "stopped" {
		t.Errorf("voice request's outcome %q, want stopped", summary.Str("outcome"))
	}
	if calls := s.ChatCalls("speaker", user); len(calls) != 0 {
		t.Errorf("%d messages sent after the stop, want none", len(calls))
	}
	var files []string
	_ = filepath.WalkDir(filepath.Join(s.DataDir, "audio-output"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("files made for a stopped request: %v", files)
	}
	if summary.Float("openai_usd") <= 0 {
		t.Errorf("the stopped request's line has openai_usd %g: want the speech made before the stop", summary.Float("openai_usd"))
	}
	admin := s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "admin endpoint listening" })
	if len(admin) == 0 {
		t.Fatal("no admin endpoint log line")
	}
	_, body := get(t, "http://"+admin[len(admin)-1].Str("addr")+"/metrics")
	if want := `brainbot_cost_usd_total{bot="speaker",provider="openai"} `; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q\n%s", want, grepLines(body, "brainbot_cost"))
	}
}

// pacedStack starts a stack whose model writes slowly (#long takes ~10 s),
// and a context to wait in.
func pacedStack(t *testing.T, env []string) (*stack.Stack, context.Context) {
	s := newStackWith(t, env)
	s.Model.SetPace(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return s, ctx
}

// waitDraft waits for a draft in user's chat with more than minLen bytes
// of text, and returns it with its draft id.
func waitDraft(ctx context.Context, t *testing.T, s *stack.Stack, token string, user int64, minLen int) (telegramtest.Call, int64) {
	t.Helper()
	draft, err := s.Telegram.WaitCall(ctx, token, func(c telegramtest.Call) bool {
		return c.Method == "sendMessageDraft" && c.ChatID() == user && len(c.Param("text")) > minLen
	})
	if err != nil {
		t.Fatalf("no draft in chat %d: %v", user, err)
	}
	id, err := strconv.ParseInt(draft.Param("draft_id"), 10, 64)
	if err != nil {
		t.Fatalf("draft_id %q: %v", draft.Param("draft_id"), err)
	}
	return draft, id
}
