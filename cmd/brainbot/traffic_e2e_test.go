package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
	"brainbot/cmd/internal/stack"
)

// Real Telegram traffic through the whole product: groups, an update the
// Telegram library cannot decode, and a burst from one user.
func TestEndToEndRealTraffic(t *testing.T) {
	s := newStack(t, nil)
	token := stack.Token("narrator")

	t.Run("in a group only messages for the bot are answered, in the group's own conversation", func(t *testing.T) {
		const user, group = 501, -1001501
		if got := wantText(t, ask(t, s, "narrator", user, "my secret is 42")); got != "You said: my secret is 42 (message 1)" {
			t.Fatalf("private reply = %q", got)
		}
		before := len(s.Model.Requests())
		s.Telegram.SendMessage(token, groupMessage(user, group, "nobody asked the bot", ""))
		s.Telegram.SendMessage(token, groupMessage(user, group, "what is my secret?", "@"+telegramtest.Username(token)))
		first := waitChat(t, s, token, group, 1)[0]
		// "message 1": a conversation of its own, not the private one.
		if got := stack.Rendered(first); got != "You said: Ann: what is my secret? (message 1)" {
			t.Fatalf("group reply = %q", got)
		}
		var sent struct {
			MessageID int `json:"message_id"`
		}
		if err := json.Unmarshal([]byte(first.Param("reply_parameters")), &sent); err != nil || sent.MessageID == 0 {
			t.Errorf("the reply does not answer the mention: reply_parameters %q", first.Param("reply_parameters"))
		}
		// A reply to the bot's message is for the bot too.
		reply := groupMessage(user, group, "and now?", "")
		reply["reply_to_message"] = map[string]any{"message_id": 1, "date": 1, "chat": reply["chat"], "text": "You said...",
			"from": map[string]any{"id": telegramtest.BotID(token), "is_bot": true, "first_name": "Narrator"}}
		s.Telegram.SendMessage(token, reply)
		if got := stack.Rendered(waitChat(t, s, token, group, 2)[1]); got != "You said: Ann: and now? (message 2)" {
			t.Fatalf("reply to the bot = %q", got)
		}
		if n := len(s.Model.Requests()) - before; n != 2 {
			t.Errorf("the model saw %d requests, want 2: the unaddressed message must not reach it", n)
		}
		for _, r := range s.Model.Requests()[before:] {
			for _, m := range r.Messages {
				for _, b := range m.Content {
					if strings.Contains(b.Text, "my secret is 42") {
						t.Errorf("the private conversation reached the group's: %q", b.Text)
					}
				}
			}
		}
	})

	t.Run("an update the Telegram library cannot decode does not stop the bot", func(t *testing.T) {
		const sender = 502
		bad := fmt.Sprintf(`{"update_id":1,"message":{"message_id":5,"date":1763888000,"chat":{"id":%d,"first_name":"Ann","type":"private"},"from":{"id":%d,"is_bot":false,"first_name":"Ann"},"forward_origin":{"type":"story_teller","date":1763887000},"forward_date":1763887000,"text":"look at this"}}`, sender, sender)
		s.Telegram.SendUpdate(token, []byte(bad))
		if got := stack.Rendered(waitChat(t, s, token, sender, 1)[0]); !strings.Contains(got, "couldn't read that message") {
			t.Errorf("the sender of the undecodable message got %q", got)
		}
		if got := wantText(t, ask(t, s, "narrator", 503, "are you still there?")); got != "You said: are you still there? (message 1)" {
			t.Errorf("next message = %q", got)
		}
		if n := len(s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "undecodable update skipped" && l.Str("level") == "warn" })); n != 1 {
			t.Errorf("%d warn lines for the undecodable update, want 1", n)
		}
	})

	t.Run("a 15-message burst gets a handful of messages back", func(t *testing.T) {
		const user = 504
		// The model holds the first answer until every message of the
		// burst has been met: nine turned away, the others queued.
		resume := s.Model.Pause()
		defer resume()
		for i := range 15 {
			s.Telegram.SendText(token, user, user, fmt.Sprintf("burst %d", i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
		defer cancel()
		summaries := func(n int, outcomes ...string) error {
			_, err := s.Logs().WaitFrom(ctx, 0, func(lines []stack.Line) bool {
				got := 0
				for _, l := range lines {
					if l.Msg == "request" && l.Int("user") == user && (len(outcomes) == 0 || slices.Contains(outcomes, l.Str("outcome"))) {
						got++
					}
				}
				return got == n
			}, nil)
			return err
		}
		if err := summaries(9, "busy", "busy, not told"); err != nil {
			t.Fatalf("the burst's nine messages beyond the queue were not turned away: %v", err)
		}
		resume()
		if err := summaries(15); err != nil {
			t.Fatalf("not every message of the burst got its summary line: %v", err)
		}
		calls := s.ChatCalls("narrator", user)
		var texts []string
		for _, c := range calls {
			texts = append(texts, stack.Rendered(c))
		}
		busy := 0
		for _, text := range texts {
			if strings.Contains(text, "still working") {
				busy++
			}
		}
		// One answered, five waiting, one notice for the other nine.
		if len(texts) != 7 || busy != 1 {
			t.Fatalf("%d replies (%d busy notices), want 7 with one notice: %q", len(texts), busy, texts)
		}
	})

	t.Run("the admin endpoint reports health, readiness and metrics of what happened", func(t *testing.T) {
		lines := s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "admin endpoint listening" })
		if len(lines) != 1 {
			t.Fatalf("no admin endpoint log line")
		}
		base := "http://" + lines[0].Str("addr")
		for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready"} {
			if code, body := get(t, base+path); code != 200 || strings.TrimSpace(body) != want {
				t.Errorf("%s = %d %q", path, code, body)
			}
		}
		_, body := get(t, base+"/metrics")
		for _, want := range []string{
			// The burst: six answered, one told busy, eight dropped silently;
			// the earlier subtests answered four more (two in the group).
			`brainbot_requests_total{bot="narrator",mode="text",outcome="ok"} 10`,
			`brainbot_requests_total{bot="narrator",mode="text",outcome="busy"} 1`,
			`brainbot_requests_total{bot="narrator",mode="text",outcome="busy, not told"} 8`,
			`brainbot_requests_total{bot="narrator",mode="text",outcome="unreadable"} 1`,
			`brainbot_undecodable_updates_total{bot="narrator"} 1`,
			`brainbot_claude_running 0`,
			// Four conversations answered ten times: each CLI started once
			// and stayed warm for the conversation's next messages.
			`brainbot_request_stage_seconds_count{stage="cli_start"} 4`,
			`brainbot_claude_warm 4`,
			"\nbrainbot_ready 1\n", // as /readyz
			`brainbot_claude_spares_taken_total`,
			`process_resident_memory_bytes`,
			`go_goroutines`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		if t.Failed() {
			t.Logf("/metrics:\n%s", grepLines(body, "brainbot_"))
		}
	})

	// After the metrics above, which count the one undecodable update.
	t.Run("a message with a field of another JSON type is answered that it could not be read", func(t *testing.T) {
		const sender = 505
		odd := fmt.Sprintf(`{"update_id":1,"message":{"message_id":6,"date":1763888000,"chat":{"id":%d,"first_name":"Ann","type":"private"},"from":{"id":%d,"is_bot":false,"first_name":"Ann"},"text":{"markdown":"look at **this**"}}}`, sender, sender)
		s.Telegram.SendUpdate(token, []byte(odd))
		if got := stack.Rendered(waitChat(t, s, token, sender, 1)[0]); !strings.Contains(got, "couldn't read that message") {
			t.Errorf("the sender of the message with a text of another type got %q", got)
		}
		// A tap of such a form is answered: the spinner stops, with a word.
		const query = "3148915127338413297"
		s.Telegram.SendUpdate(token, fmt.Appendf(nil, `{"update_id":1,"callback_query":{"id":%q,"from":{"id":%d,"is_bot":false,"first_name":"Ann"},"message":{"message_id":7,"date":1763888000,"chat":{"id":%d,"type":"private"},"text":"Which city?"},"chat_instance":-2719183736491877103,"data":"k3Jx9vQwZ2bT8mLp.1"}}`, query, sender, sender))
		if notice := waitAnswer(t, s, "narrator", query); notice != conversation.NoticeGone {
			t.Errorf("the tap of another form was answered %q, want %q", notice, conversation.NoticeGone)
		}
	})
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := roundTrip(t, req)
	return resp.StatusCode, body
}

// roundTrip sends req and returns its response with the body read.
func roundTrip(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) && !strings.Contains(l, "_bucket") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// groupMessage is a supergroup message from user, as Telegram sends it;
// with mention it starts with that @username as a mention entity.
func groupMessage(user, group int64, text, mention string) map[string]any {
	msg := map[string]any{
		"date": time.Now().Unix(),
		"chat": map[string]any{"id": group, "type": "supergroup", "title": "Friends"},
		"from": map[string]any{"id": user, "is_bot": false, "first_name": "Ann"},
		"text": text,
	}
	if mention != "" {
		msg["text"] = mention + " " + text
		msg["entities"] = []map[string]any{{"type": "mention", "offset": 0, "length": len(utf16.Encode([]rune(mention)))}}
	}
	return msg
}

// waitChat waits for n replies of the bot in chat.
func waitChat(t *testing.T, s *stack.Stack, token string, chat int64, n int) []telegramtest.Call {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		var calls []telegramtest.Call
		for _, c := range s.Telegram.Sent(token, "sendMessage", "sendVoice", "sendPhoto", "sendDocument") {
			if c.ChatID() == chat && c.Code == 200 {
				calls = append(calls, c)
			}
		}
		if len(calls) >= n {
			return calls
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d replies in chat %d, want %d\n%s", len(calls), chat, n, s.Logs().Tail(10))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
