package conversation

// Serve at the ports (kit_test.go): what each kind of message makes the
// pipeline send, ask, store and mark, exactly and in order.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/state"
	"brainbot/sysprompt"
)

// A text message: counted once, marked, answered in a new session, which
// is stored (its transcript first) before the answer goes out; the
// request carries the message's id and the prompt's variables; its usage
// is recorded.
func TestTextReplyThroughThePorts(t *testing.T) {
	k := newKit(t, "")
	in := k.private("hello")
	k.serve(in)

	answer := `out: text "Hello, Ann." formatted=true`
	k.want("out", `text "Hello, Ann." formatted=true`)
	k.want("progress", "charged text", "attempt text", "answered", "finish keep=false")
	k.want("state", "save alpha session-1", "use session session-1")
	k.before("state: use session session-1", answer)
	k.before(answer, "progress: answered")
	if got := k.outcome(in.RequestID); got != "ok" {
		t.Errorf("outcome %q", got)
	}

	reqs := k.agent.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	req := reqs[0]
	switch {
	case req.Prompt != "hello" || req.Mode != claude.Text || req.BotID != kitBot || req.Conversation != in.Key.String():
		t.Errorf("request %q in mode %v for %s, conversation %s", req.Prompt, req.Mode, req.BotID, req.Conversation)
	case req.SessionID != "" || req.Resume || req.Retry:
		t.Errorf("a first message asked with session %q, resume %v, retry %v", req.SessionID, req.Resume, req.Retry)
	case req.MessageID != in.RequestID:
		t.Errorf("message id %q, want the request's %q", req.MessageID, in.RequestID)
	case req.SystemPrompt != k.brain.SystemPrompt || req.PromptVars[sysprompt.UserFirstName] != "Ann" ||
		req.PromptVars[sysprompt.BotName] != "Alpha" || req.PromptVars[sysprompt.ChatType] != "private":
		t.Errorf("system prompt %q with %v", req.SystemPrompt, req.PromptVars)
	case !strings.HasPrefix(req.FilePrefix, "bot-alpha-user-7-"):
		t.Errorf("file prefix %q", req.FilePrefix)
	}

	s, ok, err := k.store.Session(context.Background(), in.Key)
	if err != nil || !ok || s.ID != "session-1" {
		t.Errorf("stored session %+v, %v, %v", s, ok, err)
	}
	if n, err := k.store.DailyCount(context.Background(), kitBot, kitUser, time.Now()); err != nil || n != 1 {
		t.Errorf("daily count %d, %v; want 1", n, err)
	}
	u := k.usage()
	if len(u) != 1 || u[0].Requests != 1 || u[0].Mode != "text" || u[0].ClaudeUSD != 0.02 || u[0].InputTokens != 10 || u[0].OutputTokens != 5 {
		t.Errorf("usage %+v", u)
	}
}

// The next message resumes the stored session: its transcript is
// restored first, and a warm CLI holding an older copy ends before a
// newer one lands.
func TestNextMessageResumesItsSession(t *testing.T) {
	k := newKit(t, "")
	k.serve(k.private("hello"))
	k.store.newerCopy = true
	in := k.private("and then?")
	k.serve(in)

	reqs := k.agent.requests()
	if len(reqs) != 2 || reqs[1].SessionID != "session-1" || !reqs[1].Resume {
		t.Fatalf("requests %+v", reqs)
	}
	restore, end := "state: restore alpha session-1", "agent: end "+in.Key.String()
	k.before(restore, end)
	k.before(end, `agent: run text session="session-1" resume=true retry=false`)
}

// A message the log hands out again was charged and begun before: it is
// not counted again (answered even at the limit) and asks the driver to
// keep one copy of it in the session (Retry).
func TestReplayedMessageIsNotChargedTwice(t *testing.T) {
	k := newKit(t, "limits:\n  per_user_per_day: 1\n")
	if ok, _, err := k.store.TakeDaily(context.Background(), kitBot, kitUser, 1, time.Now()); !ok || err != nil {
		t.Fatal(ok, err)
	}
	in := k.private("hello")
	progressOf(in).charged, progressOf(in).attempts = true, 1
	k.serve(in)

	k.want("out", `text "Hello, Ann." formatted=true`)
	if reqs := k.agent.requests(); len(reqs) != 1 || !reqs[0].Retry {
		t.Errorf("requests %+v, want one retry", reqs)
	}
	if n, _ := k.store.DailyCount(context.Background(), kitBot, kitUser, time.Now()); n != 1 {
		t.Errorf("daily count %d, want 1: counted twice", n)
	}
}

// Turned away before the model: no request, nothing charged or begun,
// one notice for the sender only.
func TestTurnedAwayBeforeTheModel(t *testing.T) {
	for _, c := range []struct {
		name, brain, outcome, notice string
		before                       func(*kit)
	}{
		{name: "not allowed", brain: "access:\n  allowed_users: [42]\nmessages:\n  denied: Private bot.\n",
			outcome: "denied", notice: "Private bot."},
		{name: "daily limit", brain: "limits:\n  per_user_per_day: 1\nmessages:\n  limit: Enough for today.\n",
			outcome: "limited", notice: "Enough for today.",
			before: func(k *kit) { k.store.TakeDaily(context.Background(), kitBot, kitUser, 1, time.Now()) }},
		{name: "user's spending cap", brain: "limits:\n  per_user_daily_usd: 0.05\nmessages:\n  spending_cap: Out of budget.\n",
			outcome: outcomeSpendingCap, notice: "Out of budget.",
			before: func(k *kit) { k.spend(t, kitUser, 0.05) }},
		{name: "bot's spending cap", brain: "limits:\n  daily_usd: 0.05\nmessages:\n  spending_cap: Out of budget.\n",
			outcome: outcomeSpendingCap, notice: "Out of budget.",
			before: func(k *kit) { k.spend(t, 8, 0.05) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t, c.brain)
			if c.before != nil {
				c.before(k)
			}
			in := k.private("hello")
			k.serve(in)
			k.want("out", fmt.Sprintf("notice to %d %q", kitUser, c.notice))
			k.want("progress", "answered", "finish keep=false")
			k.want("agent")
			if got := k.outcome(in.RequestID); got != c.outcome {
				t.Errorf("outcome %q, want %q", got, c.outcome)
			}
		})
	}
}

// spend records a request of user's that cost usd today.
func (k *kit) spend(t *testing.T, user int64, usd float64) {
	t.Helper()
	if err := k.store.RecordUsage(context.Background(), state.Usage{Bot: kitBot, Chat: user, User: user, RequestID: "earlier",
		Mode: "text", Outcome: "ok", ClaudeUSD: usd, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// The bot's cap reached is told to its admin once a day, not with every
// message it refuses.
func TestBotSpendingCapIsLoggedOnceADay(t *testing.T) {
	k := newKit(t, "limits:\n  daily_usd: 0.05\n")
	k.spend(t, 8, 0.05)
	k.serve(k.private("hello"))
	k.serve(k.private("hello again"))
	if n := k.logs.FilterMessageSnippet("daily spending cap reached").Len(); n != 1 {
		t.Errorf("the cap was logged %d times, want once", n)
	}
}

// Commands are answered without the model and without counting.
func TestCommands(t *testing.T) {
	k := newKit(t, "greeting: Hi, I am Alpha.\ntts:\n  user_toggle: true\nmessages:\n  reset: Fresh start.\n")
	ctx := context.Background()
	key := message.Key{Bot: kitBot, Chat: kitUser}
	if err := k.store.UseSession(ctx, key, "old", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ command, reply string }{
		{"/start", "Hi, I am Alpha."},
		{"/reset", "Fresh start."},
		{"/voice", "Voice replies are on: I will answer with voice messages."},
		{"/frobnicate", "I don't know that command. Send /help to see what I can do."},
	} {
		k.serve(k.private(c.command))
		if out := k.ev.Of("out"); out[len(out)-1] != fmt.Sprintf("text %q formatted=false", c.reply) {
			t.Errorf("%s answered %q, want %q", c.command, out[len(out)-1], c.reply)
		}
	}
	k.serve(k.private("/help"))
	if out := k.ev.Of("out"); !strings.Contains(out[len(out)-1], "/voice - ") || strings.Contains(out[len(out)-1], "/panel") {
		t.Errorf("/help of a bot with /voice on no panel: %s", out[len(out)-1])
	}
	k.want("agent", "end "+key.String()) // /reset ends the warm CLI; nothing runs
	if _, ok, _ := k.store.Session(ctx, key); ok {
		t.Error("/reset left the session")
	}
	if on, set, _ := k.store.Voice(ctx, kitBot, kitUser); !on || !set {
		t.Errorf("/voice stored %v, %v", on, set)
	}
	if n, _ := k.store.DailyCount(ctx, kitBot, kitUser, time.Now()); n != 0 {
		t.Errorf("commands counted %d against the daily limit", n)
	}

	// Voice on: the next message asks for a voice answer.
	k.agent.answer = func(context.Context, claude.Request) (*claude.Result, error) { return nil, errors.New("no voice here") }
	k.serve(k.private("say something"))
	if reqs := k.agent.requests(); len(reqs) != 1 || reqs[0].Mode != claude.Speech {
		t.Errorf("requests %+v after /voice, want one for speech", reqs)
	}
}

// A voice or image answer is the model's two turns: the file the tool
// wrote is found, moved under the bot and user and sent as its kind,
// once the session is stored; by default as soon as the tool reports it,
// before the model's closing words.
func TestFileReply(t *testing.T) {
	for _, c := range []struct {
		name, brain, text string
		mode              claude.Mode
		kind              message.FileKind
		dir, ext          string
		action            message.Action
		afterTurn         bool
	}{
		{"voice", "tts:\n  enabled: true\n", "hello", claude.Speech, message.VoiceNote, "audio-output", ".mp3", message.RecordVoice, false},
		{"voice after the turn", "tts:\n  enabled: true\n", "hello", claude.Speech, message.VoiceNote, "audio-output", ".mp3",
			message.RecordVoice, true},
		{"image", "image:\n  enabled: true\n", "draw a cat", claude.Image, message.Picture, "image-output", ".png", message.UploadPhoto, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t, c.brain, func(cfg *Config) { cfg.FileAfterTurn = c.afterTurn })
			k.agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
				res, err := k.writeFile(req, c.dir, c.ext)
				if err != nil {
					return nil, err
				}
				if (req.OnFile != nil) == c.afterTurn {
					return nil, fmt.Errorf("OnFile set: %v, with the file after the turn: %v", req.OnFile != nil, c.afterTurn)
				}
				if req.OnFile != nil {
					req.OnFile(res)
				}
				k.ev.Add("agent: turn two over")
				return res, nil
			}
			in := k.private(c.text)
			k.serve(in)

			if reqs := k.agent.requests(); len(reqs) != 1 || reqs[0].Mode != c.mode {
				t.Fatalf("requests %+v, want one in mode %v", reqs, c.mode)
			}
			out := k.ev.Of("out")
			if len(out) != 1 || !strings.HasPrefix(out[0], fmt.Sprintf("file %d %s/bot-alpha/user-7/", c.kind, c.dir)) ||
				!strings.HasSuffix(out[0], c.ext) {
				t.Fatalf("sent %q, want the one file", out)
			}
			k.before("state: use session session-1", "out: "+out[0])
			if c.afterTurn {
				k.before("agent: turn two over", "out: "+out[0])
			} else {
				k.before("out: "+out[0], "agent: turn two over")
			}
			k.want("action", string(c.action))
			k.want("progress", "charged "+c.mode.String(), "attempt "+c.mode.String(), "answered", "finish keep=false")
			if u := k.usage(); len(u) != 1 || u[0].Mode != c.mode.String() || u[0].ClaudeUSD != 0.03 {
				t.Errorf("usage %+v", u)
			}
		})
	}
}

// A request the model fails gets the brain's error text, once, and its
// usage is recorded as an error.
func TestFailureGetsTheBrainsErrorText(t *testing.T) {
	k := newKit(t, "messages:\n  error: Something broke.\n")
	k.agent.answer = func(context.Context, claude.Request) (*claude.Result, error) {
		return &claude.Result{CostUSD: 0.01}, errors.New("the CLI exited with status 1")
	}
	in := k.private("hello")
	k.serve(in)
	k.want("out", `text "Something broke." formatted=false`)
	k.want("state") // no session: the CLI reported none
	if got := k.outcome(in.RequestID); got != "error" {
		t.Errorf("outcome %q", got)
	}
	if u := k.usage(); len(u) != 1 || u[0].Errors != 1 {
		t.Errorf("usage %+v, want one error", u)
	}
	if ev := k.ev.Of("progress"); ev[len(ev)-1] != "finish keep=false" {
		t.Errorf("progress %q, want finished", ev)
	}
}

// A state that is not there for now pauses the message: it is handed
// back to its log (Finish(true)), nobody is told of an error, and a
// transcript that was not stored is forgotten with the warm CLI that
// has it.
func TestUnavailableStateHandsTheMessageBack(t *testing.T) {
	unavailable := state.Unavailable("nats", errors.New("no responders"))
	for _, c := range []struct {
		name, method string
		err          error
		ran          bool
		state        []string
	}{
		{"session unreadable", "Session", unavailable, false, nil},
		{"transcript not restored", "Restore", unavailable, false, []string{"restore alpha old"}},
		{"transcript not stored", "Save", unavailable, true, []string{"restore alpha old", "save alpha old", "forget alpha old"}},
		// Another instance stored a newer copy meanwhile: this answer did
		// not see its turns, and the next owner would restore without
		// this one's.
		{"transcript refused", "Save", errors.New("cluster: a newer transcript of the session is stored"), true,
			[]string{"restore alpha old", "save alpha old", "forget alpha old"}},
		{"session not stored", "UseSession", errors.New("database is locked"), true,
			[]string{"restore alpha old", "save alpha old", "use session old"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t, "messages:\n  error: Something broke.\n")
			in := k.private("hello")
			if err := k.store.Store.UseSession(context.Background(), in.Key, "old", time.Now()); err != nil {
				t.Fatal(err)
			}
			k.store.refuse(c.method, c.err)
			k.serve(in)

			k.want("out")
			k.want("progress", "charged text", "attempt text", "finish keep=true")
			k.want("state", c.state...)
			if ran := len(k.agent.requests()) > 0; ran != c.ran {
				t.Errorf("the model ran: %v, want %v", ran, c.ran)
			}
			if got := k.outcome(in.RequestID); got != "paused" {
				t.Errorf("outcome %q", got)
			}
			if c.method == "Save" && k.ev.Index("agent: end "+in.Key.String()) < 0 {
				t.Error("the warm CLI holding the unstored turn was not ended")
			}
		})
	}
}

// Work on a message is journaled before it starts: a newer delivery
// answering it elsewhere leaves it silent; a journal that refuses hands
// it back.
func TestAttemptMark(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		keep    bool
		outcome string
	}{
		{"superseded", fmt.Errorf("kv: %w", state.ErrSuperseded), false, "superseded"},
		{"refused", errors.New("disk full"), true, "paused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t, "")
			in := k.private("hello")
			progressOf(in).markErr = map[string]error{"attempt": c.err}
			k.serve(in)
			k.want("agent")
			k.want("out")
			k.want("progress", "charged text", "attempt text", fmt.Sprintf("finish keep=%v", c.keep))
			if got := k.outcome(in.RequestID); got != c.outcome {
				t.Errorf("outcome %q, want %q", got, c.outcome)
			}
		})
	}
}

// A stored session the CLI no longer has is retried once in a new one;
// the user hears of the loss with the answer, and the new session is
// kept.
func TestLostSessionIsRetriedInANewOne(t *testing.T) {
	k := newKit(t, "messages:\n  expired: I lost our earlier conversation.\n")
	in := k.private("hello")
	k.loseSession(in)
	k.serve(in)
	k.want("agent", `run text session="old" resume=true retry=false`, `run text session="" resume=false retry=false`)
	k.want("out", `text "I lost our earlier conversation." formatted=false`, `text "Hello again." formatted=true`)
	k.want("state", "restore alpha old", "save alpha session-2", "use session session-2")
	if s, _, _ := k.store.Session(context.Background(), in.Key); s.ID != "session-2" {
		t.Errorf("session %q, want the new one", s.ID)
	}
}

// loseSession gives in's conversation the stored session "old", which
// the CLI no longer has: resuming it fails as lost, and a new session,
// "session-2", answers "Hello again.".
func (k *kit) loseSession(in *message.Inbound) {
	k.t.Helper()
	if err := k.store.Store.UseSession(context.Background(), in.Key, "old", time.Now()); err != nil {
		k.t.Fatal(err)
	}
	k.agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		if req.Resume {
			return nil, fmt.Errorf("resume: %w", claude.ErrSessionNotFound)
		}
		return &claude.Result{Text: "Hello again.", Answered: true, SessionID: "session-2"}, nil
	}
}

// runningKit is a kit whose model holds each request until it is
// interrupted; started reports each request as it runs.
func runningKit(t *testing.T, extra string) (k *kit, started chan claude.Request) {
	k = newKit(t, extra)
	started = make(chan claude.Request, 4)
	var mu sync.Mutex
	var running chan struct{} // closed by an interrupt
	k.agent.interrupt = func(string) bool {
		mu.Lock()
		defer mu.Unlock()
		if running == nil {
			return false
		}
		close(running)
		running = nil
		return true
	}
	k.agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		stop := make(chan struct{})
		mu.Lock()
		running = stop
		mu.Unlock()
		started <- req
		select {
		case <-stop:
		case <-ctx.Done():
		}
		return &claude.Result{Text: "Half an answ", SessionID: "session-1", CostUSD: 0.01}, claude.ErrInterrupted
	}
	return k, started
}

// serveAsync serves in in the background; the channel closes when it is
// done.
func (k *kit) serveAsync(in *message.Inbound) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.p.Serve(context.Background(), in)
	}()
	return done
}

// /stop interrupts the turn being written; the stopped request sends
// nothing of its own (the /stop reply told the user). With nothing
// running there is nothing to stop.
func TestStopInterruptsTheTurn(t *testing.T) {
	k, started := runningKit(t, "")
	in := k.private("write a long story")
	done := k.serveAsync(in)
	<-started
	k.p.Stop(context.Background(), k.private("/stop"))
	<-done
	k.want("out", `text "Stopped. What next?" formatted=false`)
	k.want("agent", `run text session="" resume=false retry=false`, "interrupt "+in.Key.String())
	if got := k.outcome(in.RequestID); got != "stopped" {
		t.Errorf("outcome %q", got)
	}
	if u := k.usage(); len(u) != 1 || u[0].ClaudeUSD != 0.01 {
		t.Errorf("usage of the stopped request %+v", u)
	}

	k.p.Stop(context.Background(), k.private("/stop"))
	if out := k.ev.Of("out"); out[len(out)-1] != `text "There is nothing to stop." formatted=false` {
		t.Errorf("a /stop with nothing running answered %q", out[len(out)-1])
	}
}

// In a group only the asker, or an admin of the group as Telegram says,
// stops an answer; another member's /stop is answered for them alone.
func TestGroupStopByAnotherMember(t *testing.T) {
	k, started := runningKit(t, "")
	k.chats.admins[9] = true
	in := k.inGroup(kitUser, "Ann", "write a long story")
	done := k.serveAsync(in)
	if req := <-started; req.Prompt != "Ann: write a long story" || req.PromptVars[sysprompt.ChatType] != "supergroup" {
		t.Errorf("a group's message reached the model as %q, %v", req.Prompt, req.PromptVars)
	}
	k.p.Stop(context.Background(), k.inGroup(8, "Bob", "/stop"))
	if k.ev.Index("agent: interrupt "+in.Key.String()) >= 0 {
		t.Fatal("another member's /stop stopped the answer")
	}
	k.p.Stop(context.Background(), k.inGroup(9, "Cy", "/stop"))
	<-done
	k.want("out", fmt.Sprintf("is 8 an admin of %d", kitGroup), fmt.Sprintf("notice to 8 %q", NoticeNotYours),
		fmt.Sprintf("is 9 an admin of %d", kitGroup), `text "Stopped. What next?" formatted=false`)
}

// A message edited while it is answered: its turn stops and nothing of
// its answer is sent (a streamed one is taken back); one edited before
// its turn never runs.
func TestEditedMessageIsSuperseded(t *testing.T) {
	k, started := runningKit(t, "")
	in := k.private("helo")
	done := k.serveAsync(in)
	<-started
	in.Superseded.Store(true)
	edit := k.private("hello")
	edit.Kind = message.Edited
	k.p.Stop(context.Background(), edit)
	<-done
	k.want("out", "withdraw")
	k.want("agent", `run text session="" resume=false retry=false`, "interrupt "+in.Key.String())
	if got := k.outcome(in.RequestID); got != "edited" {
		t.Errorf("outcome %q", got)
	}

	early := k.private("helo")
	early.Superseded.Store(true)
	k.serve(early)
	if n := len(k.agent.requests()); n != 1 {
		t.Errorf("%d requests: the message edited before its turn ran", n)
	}
	if got := k.outcome(early.RequestID); got != "edited" {
		t.Errorf("outcome %q", got)
	}
}

// A guest query (the bot summoned where it is not a member) is answered
// once, in text, through the query, with no buttons to tap under it.
func TestGuestAnswer(t *testing.T) {
	k := newKit(t, "tts:\n  enabled: true\n")
	in := k.private("hello")
	in.Guest = &message.Guest{QueryID: "q1"}
	k.serve(in)
	k.want("out", `guest q1: text "Hello, Ann." formatted=true`)
	if reqs := k.agent.requests(); len(reqs) != 1 || reqs[0].Mode != claude.Text || reqs[0].Questions {
		t.Errorf("requests %+v, want one for text without questions", reqs)
	}
}
