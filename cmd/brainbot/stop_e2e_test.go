package main

import (
	"context"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
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

// In a group /stop ends only its sender's own answer: another member's
// /stop leaves it running and tells only them why (an ephemeral notice:
// the group is not told of a stop that did nothing); an admin's ends it.
func TestEndToEndGroupStopCommand(t *testing.T) { eachMode(t, testGroupStopCommand) }

func testGroupStopCommand(t *testing.T, env []string) {
	s := askerStack(t, env)
	s.Model.SetPace(100 * time.Millisecond) // #long: about 10 s
	const group, asker, member, admin = -100780, 601, 602, 7
	token := stack.Token("asker")
	s.Telegram.Promote(token, group, admin)
	s.Telegram.SendMessage(token, groupMessage(asker, group, "Tell me a story #long", ""))
	streamed := waitChat(t, s, token, group, 1)[0]

	s.Telegram.SendMessage(token, groupCommand(member, group, "/stop"))
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	notice, err := s.Telegram.WaitCall(ctx, token, func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.ChatID() == group && c.Param("text") == conversation.NoticeNotYours
	})
	if err != nil {
		t.Fatalf("the member who could not stop the answer was not told: %v\n%s", err, s.Logs().Tail(10))
	}
	if !strings.Contains(notice.Param("ephemeral_message_parameters"), `"receiver_user_id":602`) {
		t.Errorf("the notice went to the whole group: %v", notice.Params)
	}
	// The answer still runs: the admin's /stop finds it and ends it.
	s.Telegram.SendMessage(token, groupCommand(admin, group, "/stop"))
	if _, err := s.Telegram.WaitCall(ctx, token, func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.ChatID() == group && c.Param("text") == "Stopped. What next?"
	}); err != nil {
		t.Fatalf("the admin's /stop did not stop the answer: %v\n%s", err, s.Logs().Tail(10))
	}
	waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("chat") == group && l.Int("user") == asker && l.Str("outcome") == "stopped"
	})
	if n := len(s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "turn stopped by /stop" })); n != 1 {
		t.Errorf("%d turns stopped by /stop, want the admin's one", n)
	}
	if m, _ := s.Message("asker", group, streamed.MessageID); len(m.Text) >= claudetest.LongReplyLength {
		t.Errorf("the stopped answer shows %d characters: the whole answer", len(m.Text))
	}
}

// groupCommand is a bot command written by user in group, as Telegram
// sends it (a bot_command entity over its first word).
func groupCommand(user, group int64, text string) map[string]any {
	msg := groupMessage(user, group, text, "")
	cmd, _, _ := strings.Cut(text, " ")
	msg["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len(cmd)}}
	return msg
}
