package bot

// The edges where the two modes used to differ, each run in both: alone,
// with the SQLite journal, and as an instance of a cluster, on a real
// nats-server. A user meets the same in both.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"brainbot/bot/conversation"
	"brainbot/bot/telegram"
	"brainbot/bot/telegramtest"
	"brainbot/message"
	"brainbot/state/jetstream"
	"brainbot/state/jetstream/natstest"
	"brainbot/state/sqlite"
)

// mode is one way of running the bots.
type mode struct {
	name string
	// setup prepares a harness before it starts.
	setup func(t *testing.T, h *harness)
	// stored puts an update in the log before the harness starts, as
	// another process (an earlier one, another instance) would have.
	stored func(t *testing.T, h *harness, env message.Envelope)
}

var modes = []mode{
	{
		name:  "alone",
		setup: func(*testing.T, *harness) {},
		stored: func(t *testing.T, h *harness, env message.Envelope) {
			_, err := h.store.Journal(context.Background(), sqlite.Entry{Bot: env.Bot, Chat: env.Key.Chat, Thread: env.Key.Thread,
				Update: env.Raw, UpdateID: env.UpdateID, MeID: env.Me.ID, MeUsername: env.Me.Username, Created: time.Now()},
				"elsewhere@0", env.UpdateID)
			if err != nil {
				t.Fatal(err)
			}
		},
	},
	{
		name:  "cluster",
		setup: func(t *testing.T, h *harness) { h.natsURL = natstest.Start(t) },
		stored: func(t *testing.T, h *harness, env message.Envelope) {
			other, err := jetstream.Connect(context.Background(), jetstream.Config{URL: h.natsURL, Partitions: 1, Instance: "elsewhere"})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if err := other.Publish(context.Background(), env); err != nil {
				t.Fatal(err)
			}
		},
	},
}

// edgeCase is one edge, the same in every mode.
type edgeCase struct {
	name   string
	brains map[string]string
	cfg    func(*Config)
	// before runs before the harness starts.
	before func(t *testing.T, h *harness, m mode)
	run    func(t *testing.T, h *harness)
}

var edgeCases = []edgeCase{
	{
		// Told it could not be read, and the conversation goes on.
		name:   "undecodable update",
		brains: map[string]string{"alpha": brainFile(tokenA, unreadableBrain)},
		run: func(t *testing.T, h *harness) {
			raw, err := os.ReadFile(filepath.Join("telegram", "testdata", "undecodable", "forward-origin.json"))
			if err != nil {
				t.Fatal(err)
			}
			h.srv.SendUpdate(tokenA, raw)
			h.srv.SendText(tokenA, 7, 7, "probe")
			wantSent(t, h, "7:Couldn't read that.", "7:You said: probe")
			h.waitLog("undecodable update skipped")
			h.restartAnswersNothingTwice()
		},
	},
	{
		// An edit, or a tap on a button no message of ours has yet: no
		// answer, nothing stalls, and it is not met again.
		name:   "update of a kind not handled",
		brains: map[string]string{"alpha": brainFile(tokenA, "")},
		run: func(t *testing.T, h *harness) {
			h.srv.SendUpdate(tokenA, []byte(`{"update_id":1,"edited_message":{"message_id":3,"date":1763888000,"edit_date":1763888100,`+
				`"chat":{"id":7,"type":"private","first_name":"Ann"},"from":{"id":7,"is_bot":false,"first_name":"Ann"},"text":"edited"}}`))
			h.srv.SendUpdate(tokenA, []byte(`{"update_id":1,"callback_query":{"id":"4382","chat_instance":"-88","data":"more",`+
				`"from":{"id":7,"is_bot":false,"first_name":"Ann"}}}`))
			if got := h.exchange(tokenA, 7, "probe"); got.Param("text") != "You said: probe" {
				t.Fatalf("first reply %q, want the probe's", got.Param("text"))
			}
			if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
				t.Fatal(err)
			}
			h.restartAnswersNothingTwice()
		},
	},
	{
		// Work on it is cut short twice (here by shutdowns past their
		// grace): the sender is asked to send it again, once, and it is
		// finished, not tried for ever.
		name:   "message that fails every attempt",
		brains: map[string]string{"alpha": brainFile(tokenA, "")},
		cfg:    func(c *Config) { c.Grace = 50 * time.Millisecond },
		run: func(t *testing.T, h *harness) {
			h.srv.SendText(tokenA, 7, 7, "#wait for ever")
			for attempt := 1; attempt <= 2; attempt++ {
				h.claude.waitCalls(t, attempt)
				h.stop()
				h.start()
			}
			wantSent(t, h, "7:"+conversation.ResendText)
			h.restartAnswersNothingTwice()
			if n := len(h.claude.requests()); n != 3 {
				t.Errorf("the model was asked %d times, want the two attempts and the probe", n)
			}
		},
	},
	{
		// Its update waits, holding up no other conversation, until the
		// token is there; then it is answered.
		name: "brain whose token is unknown",
		brains: map[string]string{"alpha": brainFile(tokenA, ""),
			"beta": "name: Beta\nsystem_prompt: Be brief.\ntelegram:\n  token_env: BETA_TOKEN\n"},
		before: func(t *testing.T, h *harness, m mode) {
			raw := fmt.Appendf(nil, `{"update_id":900,"message":{"message_id":1,"date":1763888000,"chat":{"id":8,"type":"private","first_name":"Bo"},`+
				`"from":{"id":8,"is_bot":false,"first_name":"Bo"},"text":"for beta"}}`)
			m.stored(t, h, message.Envelope{Bot: "beta", UpdateID: 900, Key: message.Key{Bot: "beta", Chat: 8}, Raw: raw,
				Me: message.Identity{ID: telegramtest.BotID(tokenB), Username: telegramtest.Username(tokenB)}})
		},
		run: func(t *testing.T, h *harness) {
			// The line repeats the fix: the variable set and a restart, or
			// a token file, which needs none.
			if fix := h.waitLog("bot not started: no token").ContextMap()["fix"]; fix != "set BETA_TOKEN in brainbot's environment and restart it, "+
				"or write the token to a file named by telegram.token_file instead: that needs no restart" {
				t.Errorf("the line says the fix is %q", fix)
			}
			if got := h.exchange(tokenA, 7, "probe"); got.Param("text") != "You said: probe" {
				t.Fatalf("alpha's reply %q", got.Param("text"))
			}
			if sent := h.srv.Sent(tokenB); len(sent) != 0 {
				t.Fatalf("beta sent %s without its token", describeCalls(sent))
			}
			h.writeBrain("beta", brainFile(tokenB, ""))
			if got := h.waitSent(tokenB, 1)[0]; got.ChatID() != 8 || got.Param("text") != "You said: for beta" {
				t.Fatalf("beta's reply once its token is there: %d %q", got.ChatID(), got.Param("text"))
			}
		},
	},
	{
		// Refused, stored nowhere, answered never; the genuine call is.
		name:   "webhook with a forged secret",
		brains: map[string]string{"alpha": brainFile(tokenA, "")},
		cfg:    func(c *Config) { c.WebhookURL = "https://bots.example.com/telegram" },
		run: func(t *testing.T, h *harness) {
			h.waitLog("telegram webhook set")
			srv := httptest.NewServer(h.m.WebhookHandler())
			defer srv.Close()
			post := func(secret, text string, id int) int {
				body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"date":1763888000,"chat":{"id":7,"type":"private","first_name":"Ann"},`+
					`"from":{"id":7,"is_bot":false,"first_name":"Ann"},"text":%q}}`, id, id, text)
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/alpha", bytes.NewBufferString(body))
				req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if code := post("forged", "forged", 41); code != http.StatusUnauthorized {
				t.Fatalf("forged call answered %d, want 401", code)
			}
			if code := post(telegram.WebhookSecret(tokenA), "genuine", 42); code != http.StatusOK {
				t.Fatalf("genuine call answered %d, want 200", code)
			}
			if got := h.waitSent(tokenA, 1)[0]; got.Param("text") != "You said: genuine" {
				t.Fatalf("first reply %q, want the genuine call's", got.Param("text"))
			}
			h.waitLog("webhook call without the bot's secret token refused")
		},
	},
}

// TestEdgesAreTheSameInBothModes runs every edge case alone and as a
// cluster instance.
func TestEdgesAreTheSameInBothModes(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, c := range edgeCases {
				t.Run(c.name, func(t *testing.T) {
					h := newHarnessWith(t, c.brains, c.cfg, func(h *harness) {
						m.setup(t, h)
						if c.before != nil {
							c.before(t, h, m)
						}
					})
					c.run(t, h)
				})
			}
		})
	}
}

// The log's callback keeps its contract: it never waits. While one
// conversation's bot is not connected yet (its getMe held unanswered), a
// conversation of the same partition (there is one) is answered; the
// first is answered once its bot connects.
func TestWaitingForABotHoldsUpNoOtherConversation(t *testing.T) {
	var releaseBeta func()
	h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, ""), "beta": brainFile(tokenB, "")}, nil, func(h *harness) {
		modes[1].setup(t, h)
		releaseBeta = h.srv.Hold(tokenB, "getMe")
		for _, u := range []struct {
			bot   string
			token string
			chat  int64
		}{{"beta", tokenB, 8}, {"alpha", tokenA, 7}} { // beta's first, in stream order
			raw := fmt.Appendf(nil, `{"update_id":77,"message":{"message_id":1,"date":1763888000,"chat":{"id":%d,"type":"private","first_name":"Ann"},`+
				`"from":{"id":%d,"is_bot":false,"first_name":"Ann"},"text":"hello %s"}}`, u.chat, u.chat, u.bot)
			modes[1].stored(t, h, message.Envelope{Bot: u.bot, UpdateID: 77, Key: message.Key{Bot: u.bot, Chat: u.chat}, Raw: raw,
				Me: message.Identity{ID: telegramtest.BotID(u.token), Username: telegramtest.Username(u.token)}})
		}
	})
	if got := h.waitSent(tokenA, 1)[0]; got.Param("text") != "You said: hello alpha" {
		t.Fatalf("alpha's reply %q", got.Param("text"))
	}
	if sent := h.srv.Sent(tokenB); len(sent) != 0 {
		t.Fatalf("beta answered before it connected: %s", describeCalls(sent))
	}
	releaseBeta()
	if got := h.waitSent(tokenB, 1)[0]; got.ChatID() != 8 || got.Param("text") != "You said: hello beta" {
		t.Fatalf("beta's reply once connected: %d %q", got.ChatID(), got.Param("text"))
	}
}
