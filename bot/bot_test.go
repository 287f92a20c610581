package bot

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/state/sqlite"
)

func TestTextReplyAndSessions(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "claude:\n  timeout: 45s\n  max_budget_usd: 0.05\n")}, nil)
	got := h.exchange(tokenA, 7, "hello **world**")
	if got.Method != "sendMessage" || got.ChatID() != 7 || got.Param("text") != "You said: hello <b>world</b>" || got.Param("parse_mode") != "HTML" {
		t.Fatalf("reply = %+v", got)
	}
	h.exchange(tokenA, 7, "again")
	reqs := h.claude.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d Claude requests, want 2", len(reqs))
	}
	first, second := reqs[0], reqs[1]
	// A new conversation lets the driver name its session (a spare's).
	if first.Resume || first.SessionID != "" || !second.Resume || second.SessionID == "" {
		t.Fatalf("sessions: first %q resume=%v, second %q resume=%v", first.SessionID, first.Resume, second.SessionID, second.Resume)
	}
	if first.InactivityTimeout != 45*time.Second || first.SystemPrompt != "Be brief." || first.BotID != "alpha" ||
		!strings.HasPrefix(first.FilePrefix, "bot-alpha-user-7-") || first.Mode != claude.Text ||
		first.MaxTurns != 3 || first.MaxBudgetUSD != 0.05 {
		t.Errorf("request = %+v", first)
	}
	sess, ok, _ := h.store.Session(context.Background(), message.Key{Bot: "alpha", Chat: 7})
	if !ok || sess.ID != second.SessionID {
		t.Errorf("stored session = %+v, %v", sess, ok)
	}
	// One summary line per request, with the fields an operator reads.
	summary := h.waitLog("request")
	fields := summary.ContextMap()
	for _, k := range []string{"request_id", "bot", "user", "chat", "mode", "outcome", "queue_wait_ms", "claude_startup_ms",
		"turn1_ms", "turn2_ms", "claude_total_ms", "locate_ms", "send_ms", "total_ms", "cost_usd"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("summary line lacks %s: %v", k, fields)
		}
	}
	if fields["outcome"] != "ok" || fields["mode"] != "text" || fields["cost_usd"] != 0.01 {
		t.Errorf("summary = %v", fields)
	}
	// Content only at debug level.
	for _, e := range h.logs.All() {
		if e.Level > -1 && strings.Contains(fmt.Sprint(e.ContextMap()), "hello") {
			t.Errorf("message text logged at %v: %v", e.Level, e.Message)
		}
	}
}

func TestAccessDenied(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "access:\n  allowed_users: [5]\nmessages:\n  denied: Private bot.\n")}, nil)
	if got := h.exchange(tokenA, 6, "let me in"); got.Param("text") != "Private bot." {
		t.Fatalf("denied reply = %q", got.Param("text"))
	}
	if got := h.exchange(tokenA, 5, "hi"); got.Param("text") != "You said: hi" {
		t.Fatalf("allowed user's reply = %q", got.Param("text"))
	}
	if reqs := h.claude.requests(); len(reqs) != 1 || reqs[0].Prompt != "hi" {
		t.Fatalf("the model saw %d requests, want only the allowed user's", len(reqs))
	}
}

func TestCommands(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA,
		"greeting: Welcome aboard.\ntts:\n  enabled: true\n  user_toggle: true\nmessages:\n  reset: Fresh start.\n")}, nil)

	if got := h.exchange(tokenA, 7, "/start"); got.Param("text") != "Welcome aboard." {
		t.Fatalf("/start = %q", got.Param("text"))
	}
	help := h.exchange(tokenA, 7, "/help").Param("text")
	for _, want := range []string{"Tester", "A test bot.", "/start", "/help", "/reset", "/voice"} {
		if !strings.Contains(help, want) {
			t.Errorf("/help lacks %q: %q", want, help)
		}
	}
	if got := h.exchange(tokenA, 7, "/frobnicate"); !strings.Contains(got.Param("text"), "/help") {
		t.Errorf("unknown command reply = %q", got.Param("text"))
	}
	if got := h.exchange(tokenA, 7, "/start@"+telegramtest.Username(tokenA)); got.Param("text") != "Welcome aboard." {
		t.Errorf("/start@bot = %q", got.Param("text"))
	}
	// A command for another bot in a group is not ours to answer; the
	// next message is answered normally.
	h.srv.SendText(tokenA, 7, -100, "/start@some_other_bot")
	if got := h.exchange(tokenA, 7, "/voice"); !strings.Contains(got.Param("text"), "off") || got.ChatID() != 7 {
		t.Fatalf("/voice (default on) = %+v", got)
	}
	if on, set, _ := h.store.Voice(context.Background(), "alpha", 7); !set || on {
		t.Fatalf("voice toggle stored = %v,%v", on, set)
	}
	if got := h.exchange(tokenA, 7, "speak"); got.Method != "sendMessage" {
		t.Fatalf("with voice off the reply is %s", got.Method)
	}
	if got := h.exchange(tokenA, 7, "/voice"); !strings.Contains(got.Param("text"), "on") {
		t.Fatalf("/voice again = %q", got.Param("text"))
	}
	// "/reset" typed without a command entity (pasted text) goes to the model.
	h.srv.SendMessage(tokenA, map[string]any{"chat": map[string]any{"id": 8, "type": "private"},
		"from": map[string]any{"id": 8, "first_name": "U"}, "text": "/reset", "date": 1})
	if got := h.waitSent(tokenA, 8); got[7].ChatID() != 8 || got[7].Method != "sendVoice" {
		t.Fatalf("text without entity = %+v", got[7])
	}

	before, _, _ := h.store.Session(context.Background(), message.Key{Bot: "alpha", Chat: 7})
	if got := h.exchange(tokenA, 7, "/reset"); got.Param("text") != "Fresh start." {
		t.Fatalf("/reset = %q", got.Param("text"))
	}
	hist, _ := h.store.SessionHistory(context.Background(), message.Key{Bot: "alpha", Chat: 7})
	if len(hist) != 1 || hist[0].ID != before.ID {
		t.Fatalf("history after reset = %+v, want %s", hist, before.ID)
	}
	h.exchange(tokenA, 7, "new topic")
	last := h.claude.requests()[len(h.claude.requests())-1]
	if last.Resume || last.SessionID == before.ID {
		t.Fatalf("after /reset the request resumed %q", last.SessionID)
	}
	for _, r := range h.claude.requests() {
		if strings.HasPrefix(r.Prompt, "/") && r.Prompt != "/reset" {
			t.Errorf("command reached the model: %q", r.Prompt)
		}
	}
	cmds := h.srv.Sent(tokenA, "setMyCommands")
	if len(cmds) == 0 || !strings.Contains(cmds[0].Param("commands"), `"voice"`) {
		t.Fatalf("setMyCommands = %+v", cmds)
	}
}

func TestDailyLimitSurvivesRestart(t *testing.T) {
	now := time.Date(2025, 6, 1, 21, 30, 0, 0, time.UTC)
	clock := func(c *Config) { c.Now = func() time.Time { return now } }
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "limits:\n  per_user_per_day: 2\nmessages:\n  limit: Enough for today, back {reset}.\n")}, clock)
	h.exchange(tokenA, 7, "one")
	h.exchange(tokenA, 7, "two")
	if got := h.exchange(tokenA, 7, "three"); got.Param("text") != "Enough for today, back in 2h 30m." {
		t.Fatalf("over the limit: %q", got.Param("text"))
	}
	h.stop()
	h.start()
	if got := h.exchange(tokenA, 7, "four"); !strings.HasPrefix(got.Param("text"), "Enough for today") {
		t.Fatalf("after restart: %q", got.Param("text"))
	}
	if n := len(h.claude.requests()); n != 2 {
		t.Fatalf("model called %d times, want 2", n)
	}
	if got := h.exchange(tokenA, 8, "other user"); got.Param("text") != "You said: other user" {
		t.Fatalf("other user limited: %q", got.Param("text"))
	}
}

func TestModes(t *testing.T) {
	h := newHarness(t, map[string]string{
		"voice":  brainFile(tokenA, "tts:\n  enabled: true\n"),
		"both":   brainFile(tokenB, "tts:\n  enabled: true\n  send_text_too: true\nimage:\n  enabled: true\n  send_text_too: true\n"),
		"artist": brainFile(tokenC, "image:\n  enabled: true\n"),
	}, nil)
	v := h.exchange(tokenA, 7, "tell me a story")
	if v.Method != "sendVoice" || string(v.Files["voice"].Data) != "OggS-voice" || !strings.HasSuffix(v.Files["voice"].Name, ".ogg") {
		t.Fatalf("voice brain reply = %s %+v", v.Method, v.Files)
	}
	// The file was organised per bot and user.
	if m, _ := filepath.Glob(filepath.Join(h.data, "audio-output", "bot-voice", "user-7", "*.ogg")); len(m) != 1 {
		t.Fatalf("organised voice files = %v", m)
	}
	p := h.exchange(tokenC, 7, "Draw me a cat")
	if p.Method != "sendPhoto" || string(p.Files["photo"].Data) != "\x89PNG-image" {
		t.Fatalf("image reply = %s", p.Method)
	}
	for _, text := range []string{"I want to withdraw money", "photography tips", "regenerate the answer"} {
		if got := h.exchange(tokenC, 7, text); got.Method != "sendMessage" {
			t.Errorf("%q answered with %s", text, got.Method)
		}
	}
	// Image wins over speech; send_text_too adds the text after the file.
	h.srv.SendText(tokenB, 9, 9, "make a PICTURE of the sea")
	got := h.waitSent(tokenB, 2)
	if got[0].Method != "sendPhoto" || got[1].Method != "sendMessage" || got[1].Param("text") != "You said: make a PICTURE of the sea" {
		t.Fatalf("image+text reply = %s", describeCalls(got))
	}
	h.srv.SendText(tokenB, 9, 9, "hello")
	got = h.waitSent(tokenB, 4)
	if got[2].Method != "sendVoice" || got[3].Method != "sendMessage" {
		t.Fatalf("voice+text reply = %s", describeCalls(got))
	}
	// Only the file, without send_text_too: a text would have come before
	// the answer to the chat's next message.
	h.exchange(tokenA, 7, "and another")
	if sent := h.srv.Sent(tokenA); len(sent) != 2 || sent[0].Method != "sendVoice" || sent[1].Method != "sendVoice" {
		t.Fatalf("voice brain sent %s, want only a voice for each message", describeCalls(sent))
	}
}

func TestChatActionRepeatsWhileWorking(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "tts:\n  enabled: true\n")},
		func(c *Config) { c.ChatActionEvery = 10 * time.Millisecond })
	h.srv.SendText(tokenA, 7, 7, "#wait")
	actions := func() []telegramtest.Call { return h.srv.Sent(tokenA, "sendChatAction") }
	got, err := h.srv.WaitFor(h.ctx(), tokenA, 3, "sendChatAction")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if a.Param("action") != "record_voice" || a.ChatID() != 7 {
			t.Fatalf("chat action = %+v", a.Params)
		}
	}
	close(h.claude.release)
	h.waitSent(tokenA, 1)
	h.waitLog("request")
	// The request is over: its chat action loop has ended, but a call it
	// had under way when it was cancelled may still reach the stand-in.
	// A loop still running would send one every 10 ms.
	n := len(actions())
	time.Sleep(100 * time.Millisecond)
	if more := len(actions()) - n; more > 1 {
		t.Fatalf("%d chat actions after the reply", more)
	}
}

func TestPerUserOrderUnderConcurrency(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")},
		func(c *Config) { c.MaxClaude = 3; c.QueueSize = 10 })
	const users, each = 30, 5
	var wg sync.WaitGroup
	for u := int64(1); u <= users; u++ {
		wg.Go(func() {
			for i := range each {
				h.srv.SendText(tokenA, u, u, fmt.Sprintf("m%d", i))
			}
		})
	}
	wg.Wait()
	got := h.waitSent(tokenA, users*each)
	perChat := map[int64][]string{}
	for _, c := range got {
		perChat[c.ChatID()] = append(perChat[c.ChatID()], c.Param("text"))
	}
	for u := int64(1); u <= users; u++ {
		want := []string{"You said: m0", "You said: m1", "You said: m2", "You said: m3", "You said: m4"}
		if !slices.Equal(perChat[u], want) {
			t.Errorf("user %d got %q", u, perChat[u])
		}
	}
	if h.claude.maxRun > 3 {
		t.Errorf("%d concurrent Claude requests, limit 3", h.claude.maxRun)
	}
}

func TestBusyAndGlobalLimit(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  busy: Hold on.\n")},
		func(c *Config) { c.MaxClaude = 2; c.QueueSize = 1 })
	// Users 1-3 each start a blocked request; only two run at once.
	for u := int64(1); u <= 3; u++ {
		h.srv.SendText(tokenA, u, u, "#wait")
	}
	// User 1 queues one more (fits: one waits besides the one answered) and
	// one too many (busy).
	h.srv.SendText(tokenA, 1, 1, "queued")
	h.srv.SendText(tokenA, 1, 1, "overflow")
	if got := h.waitSent(tokenA, 1); got[0].Param("text") != "Hold on." || got[0].ChatID() != 1 {
		t.Fatalf("busy reply = %+v", got[0])
	}
	// The busy answer is a request like any other in the admin's log.
	if busy := h.waitLog("request"); busy.ContextMap()["outcome"] != "busy" || busy.ContextMap()["user"] != int64(1) {
		t.Errorf("first summary line = %v, want the busy one for user 1", busy.ContextMap())
	}
	h.claude.mu.Lock()
	running := h.claude.running
	h.claude.mu.Unlock()
	if running > 2 {
		t.Fatalf("%d requests running, limit 2", running)
	}
	close(h.claude.release)
	got := h.waitSent(tokenA, 5)
	var texts []string
	for _, c := range got {
		texts = append(texts, fmt.Sprintf("%d:%s", c.ChatID(), c.Param("text")))
	}
	for _, want := range []string{"1:You said: #wait", "2:You said: #wait", "3:You said: #wait", "1:You said: queued"} {
		if !slices.Contains(texts, want) {
			t.Errorf("missing %q in %q", want, texts)
		}
	}
	if h.claude.maxRun > 2 {
		t.Errorf("max concurrent = %d", h.claude.maxRun)
	}
}

func TestExpiredSessionStartsFresh(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  expired: I forgot our chat.\n")}, nil)
	ctx := context.Background()
	if err := h.store.UseSession(ctx, message.Key{Bot: "alpha", Chat: 7}, "lost-session", time.Now()); err != nil {
		t.Fatal(err)
	}
	h.srv.SendText(tokenA, 7, 7, "remember me?")
	got := h.waitSent(tokenA, 2)
	if got[0].Param("text") != "I forgot our chat." || got[1].Param("text") != "You said: remember me?" {
		t.Fatalf("replies = %s", describeCalls(got))
	}
	sess, _, _ := h.store.Session(ctx, message.Key{Bot: "alpha", Chat: 7})
	hist, _ := h.store.SessionHistory(ctx, message.Key{Bot: "alpha", Chat: 7})
	if sess.ID == "lost-session" || len(hist) != 1 || hist[0].ID != "lost-session" {
		t.Fatalf("session %q, history %+v", sess.ID, hist)
	}
	// Told once: the next message resumes the new session quietly.
	if got := h.exchange(tokenA, 7, "and now?"); got.Param("text") != "You said: and now?" {
		t.Fatalf("next reply = %q", got.Param("text"))
	}
}

func TestFailuresGetOneShortMessage(t *testing.T) {
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, "image:\n  enabled: true\nmessages:\n  error: Oops.\n"),
		"voice": brainFile(tokenB, "tts:\n  enabled: true\n"),
	}, nil)
	for _, text := range []string{"#fail", "draw #nofile"} {
		if got := h.exchange(tokenA, 7, text); got.Param("text") != "Oops." {
			t.Fatalf("%s: reply %q", text, got.Param("text"))
		}
	}
	errs := h.logs.FilterMessage("request failed").All()
	if len(errs) != 2 {
		t.Fatalf("%d error lines, want one per failure", len(errs))
	}
	for _, e := range errs {
		f := e.ContextMap()
		for _, k := range []string{"request_id", "bot", "user", "chat", "phase", "error"} {
			if _, ok := f[k]; !ok {
				t.Errorf("error line lacks %s: %v", k, f)
			}
		}
	}
	if p := errs[0].ContextMap()["phase"]; p != "claude" {
		t.Errorf("phase = %v", p)
	}
	if p := errs[1].ContextMap()["phase"]; p != "locate" {
		t.Errorf("phase = %v", p)
	}
	// Speech whose audio fails falls back to turn 1's text, logged with
	// the outcome of its own.
	for _, text := range []string{"#notool", "#nofile"} {
		if got := h.exchange(tokenB, 7, text); got.Method != "sendMessage" || got.Param("text") != "You said: "+text {
			t.Fatalf("speech fallback for %s = %s %q", text, got.Method, got.Param("text"))
		}
	}
	for warn, phase := range map[string]string{"speech failed; sending the text reply instead": "claude",
		"voice file not found; sending the text reply instead": "locate"} {
		if e := h.waitLog(warn); e.Level != zapcore.WarnLevel || e.ContextMap()["phase"] != phase || e.ContextMap()["bot"] != "voice" {
			t.Errorf("%s: %v %v", warn, e.Level, e.ContextMap())
		}
	}
	var fallbacks int
	for _, e := range waitSummaries(t, h.logs, 4) {
		if f := e.ContextMap(); f["bot"] == "voice" {
			fallbacks++
			if f["outcome"] != "speech failed" || f["mode"] != "speech" {
				t.Errorf("speech fallback summary = %v", f)
			}
		}
	}
	if fallbacks != 2 {
		t.Errorf("%d summary lines of the voice bot, want 2", fallbacks)
	}
	// A second message for a failure would have come before the answer to
	// the chat's next message.
	h.exchange(tokenA, 7, "all well?")
	if n := len(h.srv.Sent(tokenA)); n != 3 {
		t.Fatalf("%d messages for 2 failures and an answer", n)
	}
}

func TestTelegramRefusals(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "image:\n  enabled: true\n")}, nil)
	// Malformed entities: the same reply again as plain text.
	h.srv.RejectHTML(tokenA)
	if got := h.exchange(tokenA, 7, "a *b*"); got.Param("text") != "You said: a *b*" || got.Param("parse_mode") != "" {
		t.Fatalf("plain fallback = %+v", got.Params)
	}
	h.srv.ClearFailures(tokenA)
	// A photo Telegram refuses goes as a document.
	h.srv.RejectPhotos(tokenA)
	if got := h.exchange(tokenA, 7, "draw a wide panorama"); got.Method != "sendDocument" || string(got.Files["document"].Data) != "\x89PNG-image" {
		t.Fatalf("document fallback = %s", got.Method)
	}
	// A user who blocked the bot: logged at info, nothing else.
	h.srv.Block(tokenA, 9)
	h.srv.SendText(tokenA, 9, 9, "bye")
	e := h.waitLog("user blocked the bot: reply dropped")
	if e.Level != -0 || e.ContextMap()["user"] != int64(9) {
		t.Fatalf("blocked log = %v %v", e.Level, e.ContextMap())
	}
	if n := len(h.logs.FilterMessage("request failed").All()); n != 0 {
		t.Fatalf("blocked user logged as %d failures", n)
	}
}

func TestFloodRetry(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	h.srv.Flood(tokenA, "sendMessage", 2, 1)
	start := time.Now()
	if got := h.exchange(tokenA, 7, "hi"); got.Param("text") != "You said: hi" {
		t.Fatalf("reply = %q", got.Param("text"))
	}
	var flooded int
	for _, c := range h.srv.Calls(tokenA) {
		if c.Code == 429 {
			flooded++
		}
	}
	if flooded != 2 {
		t.Fatalf("%d calls answered 429, want 2", flooded)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("retried after %v: retry_after not respected", waited)
	}
}

func TestJournalReplayAfterCrash(t *testing.T) {
	srvHolder := map[string]string{"alpha": brainFile(tokenA, "")}
	// Start once to create the data folders, then stop before any message.
	h := newHarness(t, srvHolder, nil)
	h.stop()
	ctx := context.Background()
	// What a killed process leaves: a message journaled (its update
	// confirmed by the stored offset), one that was being worked on, and one
	// that had already been retried once.
	upd := h.srv.SendText(tokenA, 1, 1, "journaled before the crash")
	poller := "alpha@1001"
	entry := func(user int64, text string) sqlite.Entry {
		return sqlite.Entry{Bot: "alpha", Chat: user, User: user, MessageID: 1, Text: text, Created: time.Now()}
	}
	if _, err := h.store.Journal(ctx, entry(1, "journaled before the crash"), poller, upd); err != nil {
		t.Fatal(err)
	}
	id2, _ := h.store.Journal(ctx, entry(2, "in progress"), poller, upd)
	h.store.Attempt(ctx, id2, "text")
	id3, _ := h.store.Journal(ctx, entry(3, "failed twice"), poller, upd)
	h.store.Attempt(ctx, id3, "text")
	h.store.Attempt(ctx, id3, "text")

	h.start()
	got := h.waitSent(tokenA, 3)
	byChat := map[int64]string{}
	for _, c := range got {
		byChat[c.ChatID()] = c.Param("text")
	}
	if byChat[1] != "You said: journaled before the crash" || byChat[2] != "You said: in progress" || byChat[3] != conversation.ResendText {
		t.Fatalf("after restart: %v", byChat)
	}
	if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
		t.Fatal(err)
	}
	h.waitLog("request")
	waitEmptyJournal(t, h.store)
	// Every replayed message, the one asked to be resent included, leaves
	// its summary line.
	for deadline := time.Now().Add(10 * time.Second); h.logs.FilterMessage("request").Len() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d summary lines after the replay, want 3", h.logs.FilterMessage("request").Len())
		}
	}
	// Another restart answers nothing twice.
	h.stop()
	h.start()
	h.exchange(tokenA, 4, "fresh")
	if n := len(h.srv.Sent(tokenA)); n != 4 {
		t.Fatalf("%d messages sent, want 4: %s", n, describeCalls(h.srv.Sent(tokenA)))
	}
}

// pendingOf is bot's part of the journal.
func pendingOf(ctx context.Context, st *sqlite.Store, bot string) ([]sqlite.Entry, error) {
	all, err := st.Pending(ctx)
	var out []sqlite.Entry
	for _, e := range all {
		if e.Bot == bot {
			out = append(out, e)
		}
	}
	return out, err
}

func waitEmptyJournal(t *testing.T, st *sqlite.Store) {
	t.Helper()
	for range 1000 {
		if p, _ := pendingOf(context.Background(), st, "alpha"); len(p) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	p, _ := pendingOf(context.Background(), st, "alpha")
	t.Fatalf("journal not cleared: %+v", p)
}

func TestShutdownGraceThenReplay(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")},
		func(c *Config) { c.Grace = 50 * time.Millisecond })
	h.srv.SendText(tokenA, 7, 7, "#wait long job")
	h.claude.waitCalls(t, 1)
	h.stop() // the grace period ends and the request is cancelled
	if n := len(h.srv.Sent(tokenA)); n != 0 {
		t.Fatalf("cancelled request answered: %s", describeCalls(h.srv.Sent(tokenA)))
	}
	p, _ := pendingOf(context.Background(), h.store, "alpha")
	if len(p) != 1 || p[0].Attempts != 1 {
		t.Fatalf("journal after shutdown = %+v", p)
	}
	cut := h.waitLog("request").ContextMap()
	close(h.claude.release)
	h.start()
	if got := h.waitSent(tokenA, 1); got[0].Param("text") != "You said: #wait long job" {
		t.Fatalf("replayed reply = %q", got[0].Param("text"))
	}
	waitEmptyJournal(t, h.store)
	// One id follows the message across the restart, in the logs and to
	// the driver, which is told the session may hold it already.
	replayed := h.waitLog("request").ContextMap()
	if cut["outcome"] != "interrupted" || replayed["outcome"] != "ok" || replayed["request_id"] != cut["request_id"] {
		t.Errorf("request lines: cut short %v, replayed %v: want one request_id", cut, replayed)
	}
	reqs := h.claude.requests()
	if len(reqs) != 2 || reqs[0].MessageID != cut["request_id"] || reqs[1].MessageID != reqs[0].MessageID ||
		reqs[0].Retry || !reqs[1].Retry {
		t.Errorf("Claude requests: %d; message ids %q, retry %v", len(reqs), []string{reqs[0].MessageID, reqs[len(reqs)-1].MessageID},
			[]bool{reqs[0].Retry, reqs[len(reqs)-1].Retry})
	}
}

func TestShutdownLetsRequestsFinish(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	h.srv.SendText(tokenA, 7, 7, "#wait")
	h.claude.waitCalls(t, 1)
	go func() {
		<-h.m.stopping // shutdown has begun: polling stopped
		close(h.claude.release)
	}()
	h.stop()
	if got := h.srv.Sent(tokenA); len(got) != 1 || got[0].Param("text") != "You said: #wait" {
		t.Fatalf("in-flight request during shutdown: %s", describeCalls(got))
	}
}

func TestHotReload(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "greeting: Version one.\n")}, nil)
	if got := h.exchange(tokenA, 7, "/start"); got.Param("text") != "Version one." {
		t.Fatalf("/start = %q", got.Param("text"))
	}
	h.writeBrain("alpha", brainFile(tokenA, "greeting: Version two.\n"))
	waitFor(t, func() bool { return h.m.brain("alpha").Greeting == "Version two." })
	if got := h.exchange(tokenA, 7, "/start"); got.Param("text") != "Version two." {
		t.Fatalf("edited /start = %q", got.Param("text"))
	}
	// A new token restarts the bot on it.
	h.writeBrain("alpha", brainFile(tokenB, "greeting: Version three.\n"))
	if got := h.exchange(tokenB, 7, "/start"); got.Param("text") != "Version three." {
		t.Fatalf("after token change = %q", got.Param("text"))
	}
	h.srv.SendText(tokenA, 7, 7, "/start")
	// A new brain starts a bot.
	h.writeBrain("beta", brainFile(tokenC, "greeting: Beta.\n"))
	if got := h.exchange(tokenC, 7, "/start"); got.Param("text") != "Beta." {
		t.Fatalf("new bot = %q", got.Param("text"))
	}
	if n := len(h.srv.Sent(tokenA)); n != 2 {
		t.Fatalf("the old token still answers: %s", describeCalls(h.srv.Sent(tokenA)))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 3000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached")
}

func TestTwoBotsOneRejected(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.srv.Unauthorize(tokenB)
	h.writeBrain("bad", brainFile(tokenB, ""))
	h.writeBrain("good", brainFile(tokenA, ""))
	if got := h.exchange(tokenA, 7, "hi"); got.Param("text") != "You said: hi" {
		t.Fatalf("good bot = %q", got.Param("text"))
	}
	e := h.waitLog("telegram bot not running; retrying")
	if e.ContextMap()["bot"] != "bad" || !strings.Contains(fmt.Sprint(e.ContextMap()["cause"]), "401") {
		t.Fatalf("log = %v", e.ContextMap())
	}
	// It keeps retrying, with backoff.
	waitFor(t, func() bool { return len(h.logs.FilterMessage("telegram bot not running; retrying").All()) >= 3 })
	// Once the token works again, the bot serves.
	h.srv.ClearFailures(tokenB)
	if got := h.exchange(tokenB, 8, "back"); got.Param("text") != "You said: back" {
		t.Fatalf("recovered bot = %q", got.Param("text"))
	}
	for _, e := range h.logs.All() {
		if s := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(s, "token-a") || strings.Contains(s, "token-b") {
			t.Fatalf("token logged: %s", s)
		}
	}
}

func TestConflictIsLoggedAndRetried(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.srv.Conflict(tokenA)
	h.writeBrain("alpha", brainFile(tokenA, ""))
	e := h.waitLog("telegram bot not running; retrying")
	if !strings.Contains(fmt.Sprint(e.ContextMap()["cause"]), "409") {
		t.Fatalf("log = %v", e.ContextMap())
	}
	h.srv.ClearFailures(tokenA)
	if got := h.exchange(tokenA, 7, "hi"); got.Param("text") != "You said: hi" {
		t.Fatalf("after conflict = %q", got.Param("text"))
	}
}

// Every token is handed to OnSecret before the bot starts polling, inline
// ones included, so cmd can mask them in its logs.
func TestOnSecretSeesEveryToken(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	const envToken = "1003:token-from-env"
	h := newHarness(t, map[string]string{
		"inline":  brainFile(tokenA, ""),
		"fromenv": "name: Env\nsystem_prompt: Be brief.\ntelegram:\n  token_env: ENV_BOT_TOKEN\n",
	}, func(c *Config) {
		c.LookupEnv = func(name string) (string, bool) { return envToken, name == "ENV_BOT_TOKEN" }
		c.OnSecret = func(token string) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, token)
		}
	})
	h.exchange(tokenA, 7, "hello")
	h.exchange(envToken, 7, "hello")
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(seen)
	if want := []string{tokenA, envToken}; !slices.Equal(seen, want) {
		t.Errorf("OnSecret saw %q, want %q", seen, want)
	}
}

// A Telegram server error (5xx with a JSON body) is transient: the same
// call is retried and the user gets the real reply, not the error text.
func TestServerErrorIsRetried(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  error: Oops.\n")}, nil)
	h.srv.Fail(tokenA, telegramtest.Rule{Method: "sendMessage", Times: 1,
		Err: telegramtest.APIError{Code: 502, Description: "Bad Gateway"}})
	if got := h.exchange(tokenA, 7, "hi"); got.Param("text") != "You said: hi" {
		t.Fatalf("reply after a 502 = %q", got.Param("text"))
	}
}

// A first request whose CLI died before starting the session leaves no
// session behind: the next message starts a new one quietly instead of
// telling the user a conversation they never had was lost.
func TestSessionNotStoredWhenCLINeverStartedIt(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  error: Oops.\n  expired: I forgot our chat.\n")}, nil)
	if got := h.exchange(tokenA, 7, "#crash"); got.Param("text") != "Oops." {
		t.Fatalf("crash reply = %q", got.Param("text"))
	}
	if sess, ok, _ := h.store.Session(context.Background(), message.Key{Bot: "alpha", Chat: 7}); ok {
		t.Fatalf("session %q stored though the CLI never started it", sess.ID)
	}
	if got := h.exchange(tokenA, 7, "hello"); got.Param("text") != "You said: hello" {
		t.Fatalf("next reply = %q", got.Param("text"))
	}
	if n := len(h.srv.Sent(tokenA)); n != 2 {
		t.Fatalf("%d messages sent, want 2: %s", n, describeCalls(h.srv.Sent(tokenA)))
	}
}

// A message that shutdown interrupts while it waits for a Claude slot is
// replayed on the next start without counting against the daily limit a
// second time.
func TestReplayAfterShutdownCountsOnce(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")},
		func(c *Config) { c.MaxClaude = 1; c.Grace = 50 * time.Millisecond })
	ctx := context.Background()
	h.srv.SendText(tokenA, 1, 1, "#wait holds the only slot")
	h.claude.waitCalls(t, 1)
	h.srv.SendText(tokenA, 2, 2, "waits for it")
	waitFor(t, func() bool {
		n, _ := h.store.DailyCount(ctx, "alpha", 2, time.Now())
		return n == 1
	})
	h.stop()
	close(h.claude.release)
	h.start()
	h.waitSent(tokenA, 2)
	waitEmptyJournal(t, h.store)
	for _, user := range []int64{1, 2} {
		if n, _ := h.store.DailyCount(ctx, "alpha", user, time.Now()); n != 1 {
			t.Errorf("user %d: daily count %d after replay, want 1", user, n)
		}
	}
}

// tts.enabled is each user's default; with user_toggle a brain can start
// with voice off and let users switch it on.
func TestVoiceOffByDefaultUsersSwitchItOn(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "tts:\n  enabled: false\n  user_toggle: true\n")}, nil)
	if help := h.exchange(tokenA, 7, "/help").Param("text"); !strings.Contains(help, "/voice") {
		t.Errorf("/help lacks /voice: %q", help)
	}
	if got := h.exchange(tokenA, 7, "hello"); got.Method != "sendMessage" {
		t.Fatalf("default reply is %s, want text", got.Method)
	}
	if got := h.exchange(tokenA, 7, "/voice"); !strings.Contains(got.Param("text"), "on") {
		t.Fatalf("/voice = %q, want voice switched on", got.Param("text"))
	}
	if got := h.exchange(tokenA, 7, "hello again"); got.Method != "sendVoice" {
		t.Fatalf("after /voice the reply is %s, want sendVoice", got.Method)
	}
	// Another user still gets the brain's default.
	if got := h.exchange(tokenA, 8, "hi"); got.Method != "sendMessage" {
		t.Fatalf("another user's reply is %s, want text", got.Method)
	}
}

// A lost session whose fresh retry also fails gets one reply, the error
// message, not the "new conversation" notice as well.
func TestExpiredSessionAndFailureIsOneReply(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  expired: I forgot our chat.\n  error: Oops.\n")}, nil)
	if err := h.store.UseSession(context.Background(), message.Key{Bot: "alpha", Chat: 7}, "lost-session", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := h.exchange(tokenA, 7, "please #fail"); got.Param("text") != "Oops." {
		t.Fatalf("reply = %q, want the error message", got.Param("text"))
	}
	h.waitLog("request")
	if sent := h.srv.Sent(tokenA, "sendMessage"); len(sent) != 1 {
		t.Errorf("%d messages sent, want 1: %s", len(sent), describeCalls(sent))
	}
}
