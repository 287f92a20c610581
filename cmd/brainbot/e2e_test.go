package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/mcp/openaitest"
	"brainbot/output"
)

// The end-to-end suite: brainbot run as a separate process, the real
// Claude Code CLI, our MCP tools (served by brainbot), and stand-ins for
// Telegram, the model and OpenAI. Every scenario goes through Telegram
// only and checks what a user would see.

const (
	narratorBrain = `name: Narrator
description: Tells you what you said
telegram:
  token_env: NARRATOR_TOKEN
system_prompt: You are a warm storyteller.
`
	speakerBrain = `name: Speaker
telegram:
  token_env: SPEAKER_TOKEN
system_prompt: You answer briefly; your answers are read aloud.
tts:
  enabled: true
  voice: nova
  format: mp3
  user_toggle: true
`
	painterBrain = `name: Painter
telegram:
  token_env: PAINTER_TOKEN
system_prompt: You paint what people ask for.
image:
  enabled: true
  model: dall-e-2
  size: 256x256
`
	privateBrain = `name: Private
telegram:
  token_env: PRIVATE_TOKEN
system_prompt: You talk only to your owner.
access:
  allowed_users: [7]
messages:
  denied: Go away, stranger.
`
	sleepyBrain = `name: Sleepy
telegram:
  token_env: SLEEPY_TOKEN
system_prompt: You are slow.
claude:
  timeout: 3s
`
)

// waitLong bounds each wait for an answer: the real CLI under -race and a
// loaded machine can take a while, but never this long.
const waitLong = 2 * time.Minute

// newStack starts brainbot with the test brains; prepare, if set, runs
// before brainbot starts (to seed its data folder).
func newStack(tb testing.TB, prepare func(*stack.Stack)) *stack.Stack {
	tb.Helper()
	return newStackWithPrepare(tb, nil, nil, prepare)
}

// newStackWith is newStack with extra environment for brainbot.
func newStackWith(tb testing.TB, env []string) *stack.Stack {
	tb.Helper()
	return newStackWithPrepare(tb, nil, env, nil)
}

// newStackWithBrains is newStack with more brains (file name → YAML).
func newStackWithBrains(tb testing.TB, more map[string]string) *stack.Stack {
	tb.Helper()
	return newStackWithPrepare(tb, more, nil, nil)
}

func newStackWithPrepare(tb testing.TB, more map[string]string, env []string, prepare func(*stack.Stack)) *stack.Stack {
	tb.Helper()
	cli := claudetest.RequireCLI(tb)
	brains := map[string]string{
		"narrator.yaml": narratorBrain,
		"speaker.yaml":  speakerBrain,
		"painter.yaml":  painterBrain,
		"private.yaml":  privateBrain,
		"sleepy.yaml":   sleepyBrain,
	}
	maps.Copy(brains, more)
	return startStack(tb, stack.Config{
		Brainbot:  brainbotBinary(tb),
		ClaudeCmd: cli,
		Dir:       tb.TempDir(),
		Brains:    brains,
		Env:       append([]string{"BRAINBOT_GRACE=20s", "BRAINBOT_HTTP_ADDR=127.0.0.1:0"}, env...),
		Logs:      testLogs(tb),
	}, prepare)
}

// startWith starts brainbot with the one brain file holding yaml, in the
// mode env says (eachMode), the real CLI answering.
func startWith(t *testing.T, file, yaml string, env []string) *stack.Stack {
	t.Helper()
	return startStack(t, stack.Config{
		Brainbot: brainbotBinary(t), ClaudeCmd: claudetest.RequireCLI(t), Dir: t.TempDir(), Logs: testLogs(t),
		Brains: map[string]string{file: yaml},
		Env:    append([]string{"BRAINBOT_HTTP_ADDR=127.0.0.1:0"}, env...),
	}, nil)
}

// startStack starts brainbot as cfg says, closed when the test ends;
// prepare, if set, runs before brainbot starts.
func startStack(tb testing.TB, cfg stack.Config, prepare func(*stack.Stack)) *stack.Stack {
	tb.Helper()
	s, err := stack.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	if prepare != nil {
		prepare(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	return s
}

// metricsOf is what brainbot's /metrics serves now.
func metricsOf(t *testing.T, s *stack.Stack) string {
	t.Helper()
	_, body := get(t, "http://"+adminAddr(t, s)+"/metrics")
	return body
}

func ask(tb testing.TB, s *stack.Stack, bot string, user int64, text string) stack.Reply {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	r, err := s.Ask(ctx, bot, user, text)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// wantText asserts the answer is exactly one text message and returns it.
func wantText(t *testing.T, r stack.Reply) string {
	t.Helper()
	if got := r.Methods(); len(got) != 1 || got[0] != "sendMessage" {
		t.Fatalf("want exactly one sendMessage, got %v (summary %s)", got, r.Summary.Raw)
	}
	return r.Texts()[0]
}

// buildInfo is the series brainbot_build_info of a stamped or unstamped build.
var buildInfo = regexp.MustCompile(`(?m)^brainbot_build_info\{revision="[^"]+",version="[^"]+"\} 1$`)

func TestEndToEnd(t *testing.T) {
	s := newStack(t, nil)

	t.Run("text reply, then the session is resumed", func(t *testing.T) {
		if got := wantText(t, ask(t, s, "narrator", 101, "hello there")); got != "You said: hello there (message 1)" {
			t.Errorf("first reply = %q", got)
		}
		if got := wantText(t, ask(t, s, "narrator", 101, "and again")); got != "You said: and again (message 2)" {
			t.Errorf("second reply = %q (the session was not resumed)", got)
		}
		// With an API key configured, the CLI runs bare: none of this
		// account's Claude Code hooks, plugins or CLAUDE.md reach the bots.
		if start := s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "brainbot starting" }); len(start) == 0 || start[0].Fields["claude_bare"] != true {
			t.Errorf("start-up line %v: want claude_bare true", start)
		}
		// The system prompt reached the model.
		reqs := s.Model.Requests()
		if last := reqs[len(reqs)-1]; !strings.Contains(last.System, "You are a warm storyteller.") {
			t.Errorf("model's system prompt = %q", last.System)
		}
	})

	t.Run("/start, /help and /reset do not reach the model", func(t *testing.T) {
		before := len(s.Model.Requests())
		if got := wantText(t, ask(t, s, "narrator", 102, "/start")); !strings.Contains(got, "Narrator") || !strings.Contains(got, "/reset") {
			t.Errorf("/start = %q", got)
		}
		if got := wantText(t, ask(t, s, "narrator", 102, "/help")); !strings.Contains(got, "Tells you what you said") {
			t.Errorf("/help = %q", got)
		}
		ask(t, s, "narrator", 102, "remember this")
		if got := wantText(t, ask(t, s, "narrator", 102, "/reset")); !strings.Contains(got, "new conversation") {
			t.Errorf("/reset = %q", got)
		}
		if got := len(s.Model.Requests()) - before; got != 1 {
			t.Errorf("the model saw %d requests, want 1 (only the plain message)", got)
		}
		if got := wantText(t, ask(t, s, "narrator", 102, "who am I?")); got != "You said: who am I? (message 1)" {
			t.Errorf("after /reset = %q, want a new conversation", got)
		}
	})

	t.Run("a stranger is refused without reaching the model", func(t *testing.T) {
		before := len(s.Model.Requests())
		if got := wantText(t, ask(t, s, "private", 666, "let me in")); got != "Go away, stranger." {
			t.Errorf("stranger got %q", got)
		}
		if got := wantText(t, ask(t, s, "private", 7, "it's me")); got != "You said: it's me (message 1)" {
			t.Errorf("owner got %q", got)
		}
		if got := len(s.Model.Requests()) - before; got != 1 {
			t.Errorf("the model saw %d requests, want 1 (the owner's)", got)
		}
	})

	t.Run("voice brain answers with exactly one voice note", func(t *testing.T) {
		r := ask(t, s, "speaker", 201, "tell me a story")
		if got := r.Methods(); len(got) != 1 || got[0] != "sendVoice" {
			t.Fatalf("want exactly one sendVoice and no text, got %v\n%s", got, r.Summary.Raw)
		}
		voice := r.Calls[0].Files["voice"]
		if !bytes.HasPrefix(voice.Data, []byte{0xFF}) && !bytes.HasPrefix(voice.Data, []byte("ID3")) {
			t.Errorf("voice upload is not MP3 (%d bytes, starts %x)", len(voice.Data), voice.Data[:min(4, len(voice.Data))])
		}
		files := organised(t, filepath.Join(s.DataDir, "audio-output", "bot-speaker", "user-201"))
		if len(files) != 1 || !strings.HasPrefix(filepath.Base(files[0]), "bot-speaker-user-201-") || !strings.HasSuffix(files[0], ".mp3") {
			t.Fatalf("organised audio = %v, want one bot-speaker-user-201-<t1>-<t2>.mp3", files)
		}
		if onDisk, _ := os.ReadFile(files[0]); !bytes.Equal(onDisk, voice.Data) {
			t.Errorf("the file sent is not the organised file")
		}
		// The voice is the model's exact turn-1 answer.
		reqs := s.OpenAI.Requests()
		if last := reqs[len(reqs)-1]; last.Input != "You said: tell me a story (message 1)" {
			t.Errorf("speech input = %q", last.Input)
		}
		if r.Summary.Str("mode") != "speech" || r.Summary.Str("outcome") != "ok" {
			t.Errorf("summary = %s", r.Summary.Raw)
		}
		// What it cost, by provider: the model's and the voice's.
		body := metricsOf(t, s)
		for _, provider := range []string{"claude", "openai"} {
			if want := `brainbot_cost_usd_total{bot="speaker",provider="` + provider + `"} `; !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q\n%s", want, grepLines(body, "brainbot_cost"))
			}
		}
		// Which release answered, as `brainbot version` says it.
		if !buildInfo.MatchString(body) {
			t.Errorf("/metrics lacks brainbot_build_info with a version and a revision:\n%s", grepLines(body, "brainbot_build_info"))
		}
	})

	t.Run("/voice switches a user's voice replies off", func(t *testing.T) {
		if got := wantText(t, ask(t, s, "speaker", 202, "/voice")); !strings.Contains(got, "off") {
			t.Errorf("/voice = %q", got)
		}
		if got := wantText(t, ask(t, s, "speaker", 202, "plain please")); got != "You said: plain please (message 1)" {
			t.Errorf("reply = %q", got)
		}
	})

	t.Run("image brain draws on request and talks otherwise", func(t *testing.T) {
		r := ask(t, s, "painter", 301, "draw a lighthouse at dusk")
		if got := r.Methods(); len(got) != 1 || got[0] != "sendPhoto" {
			t.Fatalf("want exactly one sendPhoto and no text, got %v\n%s", got, r.Summary.Raw)
		}
		img, err := png.Decode(bytes.NewReader(r.Calls[0].Files["photo"].Data))
		if err != nil {
			t.Fatalf("photo is not a PNG: %v", err)
		}
		if b := img.Bounds(); b.Dx() != 256 || b.Dy() != 256 {
			t.Errorf("photo is %v, want 256x256 as the brain says", b.Size())
		}
		files := organised(t, filepath.Join(s.DataDir, "image-output", "bot-painter", "user-301"))
		if len(files) != 1 || !strings.HasSuffix(files[0], ".png") {
			t.Errorf("organised images = %v", files)
		}
		reqs := s.OpenAI.Requests()
		if last := reqs[len(reqs)-1]; !strings.Contains(last.Prompt, "lighthouse") || last.Size != "256x256" {
			t.Errorf("image request = %+v", last)
		}
		// "photography" is not a request for an image.
		if got := wantText(t, ask(t, s, "painter", 301, "what is photography?")); !strings.HasPrefix(got, "You said: what is photography?") {
			t.Errorf("plain question = %q", got)
		}
	})

	t.Run("10 users x 2 messages at once are each answered in order", func(t *testing.T) {
		var pending []*stack.Pending
		for u := int64(401); u <= 410; u++ {
			for i := 1; i <= 2; i++ {
				pending = append(pending, s.Send("narrator", u, fmt.Sprintf("user %d message %d", u, i)))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
		defer cancel()
		for _, p := range pending {
			if _, err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for u := int64(401); u <= 410; u++ {
			var texts []string
			for _, c := range s.ChatCalls("narrator", u) {
				texts = append(texts, stack.Rendered(c))
			}
			want := []string{
				fmt.Sprintf("You said: user %d message 1 (message 1)", u),
				fmt.Sprintf("You said: user %d message 2 (message 2)", u),
			}
			if strings.Join(texts, "|") != strings.Join(want, "|") {
				t.Errorf("user %d got %q, want %q", u, texts, want)
			}
		}
	})

	t.Run("a brain edited while running applies; a broken edit keeps the last good", func(t *testing.T) {
		edited := strings.Replace(narratorBrain, "You are a warm storyteller.", "You are an EDITED storyteller.", 1)
		mark := s.Logs().Len()
		if err := s.WriteBrain("narrator.yaml", edited); err != nil {
			t.Fatal(err)
		}
		waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "brain loaded" && l.Str("bot") == "narrator" })
		wantText(t, ask(t, s, "narrator", 501, "after the edit"))
		reqs := s.Model.Requests()
		if last := reqs[len(reqs)-1]; !strings.Contains(last.System, "EDITED") {
			t.Errorf("the edit did not reach the model: system = %q", last.System)
		}

		mark = s.Logs().Len()
		if err := s.WriteBrain("narrator.yaml", edited+"tts:\n  speed: 9\n"); err != nil {
			t.Fatal(err)
		}
		line := waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Level == "error" && l.Str("bot") == "narrator" })
		if want := "narrator.yaml:7: tts.speed"; !strings.Contains(line.Raw, want) {
			t.Errorf("broken edit logged as %s, want it to say %q", line.Raw, want)
		}
		if got := wantText(t, ask(t, s, "narrator", 501, "still there?")); got != "You said: still there? (message 2)" {
			t.Errorf("after a broken edit = %q, want the last good brain answering", got)
		}
		if err := s.WriteBrain("narrator.yaml", narratorBrain); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a bot added with a token file starts without a restart", func(t *testing.T) {
		// As an admin adds a bot under the service, whose environment is
		// fixed at start: the token in a file first, then the brain.
		tokens := filepath.Join(filepath.Dir(s.BrainsDir), "tokens")
		if err := os.MkdirAll(tokens, 0o750); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(tokens, "poet"), stack.Token("poet")+"\n")
		mark := s.Logs().Len()
		if err := s.WriteBrain("poet.yaml", "name: Poet\ntelegram:\n  token_file: ../tokens/poet\nsystem_prompt: You write verse.\n"); err != nil {
			t.Fatal(err)
		}
		waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "telegram bot polling" && l.Str("bot") == "poet" })
		if got := wantText(t, ask(t, s, "poet", 511, "a verse, please")); got != "You said: a verse, please (message 1)" {
			t.Errorf("the new bot answered %q", got)
		}
	})

	t.Run("the model failing gets the user an apology", func(t *testing.T) {
		r := ask(t, s, "narrator", 601, "please #fail")
		if got := wantText(t, r); got != "Sorry, something went wrong. Please try again." {
			t.Errorf("reply = %q", got)
		}
		if r.Summary.Str("outcome") == "ok" {
			t.Errorf("summary = %s", r.Summary.Raw)
		}
		errLine := s.Logs().Find(0, func(l stack.Line) bool {
			return l.Level == "error" && l.Str("bot") == "narrator" && l.Int("user") == 601
		})
		if len(errLine) != 1 || errLine[0].Str("request_id") == "" || errLine[0].Str("phase") == "" {
			t.Errorf("want one error line with request_id and phase, got %v", errLine)
		}
	})

	t.Run("the model hanging times out with no process left", func(t *testing.T) {
		r := ask(t, s, "sleepy", 602, "please #hang")
		if got := wantText(t, r); got != "Sorry, something went wrong. Please try again." {
			t.Errorf("reply = %q", got)
		}
		// Other conversations' CLIs stay warm; the hung one is gone.
		waitNoCLI(t, s, sessionOf(t, s, 602))
	})

	t.Run("speech service failing", func(t *testing.T) {
		r := ask(t, s, "speaker", 603, "say this #openai-500")
		if len(r.Calls) != 1 {
			t.Fatalf("want exactly one reply, got %v", r.Methods())
		}
		// Either the turn-1 text as a fallback or the apology; never silence.
		if got := r.Texts(); len(got) != 1 || (!strings.HasPrefix(got[0], "You said: say this") && got[0] != "Sorry, something went wrong. Please try again.") {
			t.Errorf("reply = %v", got)
		}
		// The fallback has its own outcome, the apology the error's.
		if got := r.Texts(); len(got) == 1 {
			want := "error"
			if strings.HasPrefix(got[0], "You said:") {
				want = "speech failed"
			}
			if outcome := r.Summary.Str("outcome"); outcome != want {
				t.Errorf("outcome %q for the reply %q, want %q", outcome, got[0], want)
			}
		}
	})

	t.Run("a voice brain whose model fails sends the error message, counted as an error; a failed voice sends the words", func(t *testing.T) {
		// The scripted model answers HTTP 400: the CLI's turn 1 ends with
		// "API Error: 400 ...", which is no answer of the persona's.
		r := ask(t, s, "speaker", 610, "say this #fail")
		if got := wantText(t, r); got != "Sorry, something went wrong. Please try again." {
			t.Errorf("reply = %q, want the brain's messages.error", got)
		}
		if r.Summary.Str("outcome") != "error" || r.Summary.Str("mode") != "speech" {
			t.Errorf("summary = %s, want outcome error in speech mode", r.Summary.Raw)
		}
		body := metricsOf(t, s)
		if want := `brainbot_requests_total{bot="speaker",mode="speech",outcome="error"} `; !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q\n%s", want, grepLines(body, "brainbot_requests_total"))
		}
		// A turn 1 that answered and a voice that failed (turn 2 calls no
		// tool): the persona's words go as text.
		r = ask(t, s, "speaker", 611, "say this #notool")
		if got := wantText(t, r); got != "You said: say this #notool (message 1)" {
			t.Errorf("reply = %q, want turn 1's words as text", got)
		}
		if r.Summary.Str("outcome") != "speech failed" {
			t.Errorf("summary = %s, want outcome speech failed", r.Summary.Raw)
		}
	})

	t.Run("image service failing", func(t *testing.T) {
		r := ask(t, s, "painter", 604, "draw something forbidden #openai-policy")
		if got := wantText(t, r); got != "Sorry, something went wrong. Please try again." {
			t.Errorf("reply = %q", got)
		}
	})

	t.Run("a model asking for Bash runs no command", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "pwned")
		// "Done." is the model's answer to the CLI refusing its Bash call:
		// the call was made, so the missing file below proves something.
		if got := wantText(t, ask(t, s, "narrator", 605, "#bash "+target)); got != claudetest.DoneReply {
			t.Errorf("reply = %q, want %q after the refused Bash call", got, claudetest.DoneReply)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Fatalf("the model's Bash command ran: %s exists (%v)", target, err)
		}
	})

	t.Run("a hostile filename leaves no file outside the output folder", func(t *testing.T) {
		// The call does not carry the request's file name, so it is not
		// the call the bot asked for: refused before OpenAI, and the bot
		// apologises.
		before := len(s.OpenAI.Requests())
		r := ask(t, s, "painter", 606, "draw a fox #evilpath")
		if got := wantText(t, r); got != "Sorry, something went wrong. Please try again." {
			t.Errorf("reply = %q", got)
		}
		// The call with the hostile name was made, and refused.
		if refused := refusedCalls(s, 606); len(refused) != 1 || !strings.Contains(refused[0].Str("error"), "file name") {
			t.Fatalf("want one refused call with the hostile file name, got %v", refused)
		}
		if n := len(s.OpenAI.Requests()) - before; n != 0 {
			t.Errorf("OpenAI saw %d requests for a refused call", n)
		}
		// ../../evil from image-output is the folder holding BRAINBOT_DATA.
		for _, dir := range []string{s.DataDir, filepath.Dir(s.DataDir)} {
			if matches, _ := filepath.Glob(filepath.Join(dir, "evil*")); len(matches) > 0 {
				t.Errorf("file written outside the output folder: %v", matches)
			}
		}
	})

	t.Run("a model spending on its own gets only the call the bot asks for", func(t *testing.T) {
		// The model calls both file tools in turn one with the dearest
		// settings, and asks for them again in turn two.
		for _, tt := range []struct {
			bot, text, method, folder string
			user                      int64
			brains                    func(openaitest.Request) bool
		}{
			{"speaker", "tell me a story #owntool", "sendVoice", "audio-output", 609,
				func(r openaitest.Request) bool { return r.Voice == "nova" && r.Model == "tts-1" && r.Speed == 1 }},
			{"painter", "draw a castle #owntool", "sendPhoto", "image-output", 610,
				func(r openaitest.Request) bool {
					return r.Model == "dall-e-2" && r.Size == "256x256" && r.Quality == "" && r.Style == ""
				}},
		} {
			before := len(s.OpenAI.Requests())
			r := ask(t, s, tt.bot, tt.user, tt.text)
			if got := r.Methods(); len(got) != 1 || got[0] != tt.method {
				t.Fatalf("%s: want exactly one %s, got %v\n%s", tt.bot, tt.method, got, r.Summary.Raw)
			}
			if files := organised(t, filepath.Join(s.DataDir, tt.folder, "bot-"+tt.bot, fmt.Sprintf("user-%d", tt.user))); len(files) != 1 {
				t.Errorf("%s: organised files %v, want one", tt.bot, files)
			}
			if reqs := s.OpenAI.Requests()[before:]; len(reqs) != 1 || !tt.brains(reqs[0]) {
				t.Errorf("%s: OpenAI saw %+v; want one call with the brain's settings", tt.bot, reqs)
			}
			// The turn-one calls reached brainbot and were refused, in the
			// request's log.
			if refused := refusedCalls(s, tt.user); len(refused) != 2 {
				t.Errorf("%s: %d refused calls logged, want the 2 of turn one: %v", tt.bot, len(refused), refused)
			}
		}
	})

	t.Run("a 429 from Telegram is retried after retry_after", func(t *testing.T) {
		s.Telegram.Flood(stack.Token("narrator"), "sendMessage", 1, 1)
		r := ask(t, s, "narrator", 607, "flood me")
		if got := wantText(t, r); got != "You said: flood me (message 1)" {
			t.Errorf("reply = %q", got)
		}
		var refused, delivered telegramtest.Call
		for _, c := range s.Telegram.Calls(stack.Token("narrator")) {
			if c.Method == "sendMessage" && c.ChatID() == 607 {
				if c.Code == 429 {
					refused = c
				} else if c.Code == 200 {
					delivered = c
				}
			}
		}
		if refused.Code != 429 || delivered.Time.Sub(refused.Time) < time.Second {
			t.Errorf("want a 429 then delivery at least retry_after (1s) later; got 429 at %v, 200 at %v", refused.Time, delivered.Time)
		}
	})

	t.Run("a 6000-character reply is split", func(t *testing.T) {
		r := ask(t, s, "narrator", 608, "#long")
		texts := r.Texts()
		if len(texts) < 2 {
			t.Fatalf("want the reply split in several messages, got %d", len(texts))
		}
		total := 0
		for _, text := range texts {
			if n := len([]rune(text)); n > 4096 || n == 0 {
				t.Errorf("a part has %d characters", n)
			}
			total += len([]rune(text))
		}
		if total < claudetest.LongReplyLength-100 {
			t.Errorf("parts hold %d characters, want about %d", total, claudetest.LongReplyLength)
		}
	})

	t.Run("SIGTERM, then a new start continues the session", func(t *testing.T) {
		wantText(t, ask(t, s, "narrator", 701, "before the restart"))
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		mark := s.Logs().Len()
		code, err := s.Stop(ctx, syscall.SIGTERM)
		if err != nil || code != 0 {
			t.Fatalf("SIGTERM: exit %d, %v\n%s", code, err, s.Logs().Tail(10))
		}
		// The signal is logged when it arrives, before the stop ends.
		var stopping, stopped int
		for i, l := range s.Logs().Lines()[mark:] {
			switch {
			case strings.HasPrefix(l.Msg, "stopping: ") && l.Str("cause") == "terminated signal received" && l.Int("grace_ms") == 20000:
				stopping = i + 1
			case l.Msg == "brainbot stopped":
				stopped = i + 1
			}
		}
		if stopping == 0 || stopped <= stopping {
			t.Errorf("want a line for the signal (cause, grace) before \"brainbot stopped\":\n%s", s.Logs().Tail(12))
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if got := wantText(t, ask(t, s, "narrator", 701, "after the restart")); got != "You said: after the restart (message 2)" {
			t.Errorf("after restart = %q, want the same conversation", got)
		}
	})

	t.Run("a copied brain that kept the token never takes the bot, after a restart neither", func(t *testing.T) {
		wantText(t, ask(t, s, "narrator", 703, "hello"))
		copied := strings.Replace(narratorBrain, "You are a warm storyteller.", "You are a COPY.", 1)
		copyPath := filepath.Join(s.BrainsDir, "a-copy.yaml") // before narrator.yaml by name
		refused := func(mark int) {
			t.Helper()
			line := waitLogFrom(t, s, mark, func(l stack.Line) bool {
				return l.Msg == "brain file has problems; bot not started" && l.Str("file") == copyPath
			})
			if want := "NARRATOR_TOKEN is already the token of " + filepath.Join(s.BrainsDir, "narrator.yaml"); !strings.Contains(line.Str("error"), want) {
				t.Errorf("the copy refused with %q, want it to name the original: %q", line.Str("error"), want)
			}
		}
		mark := s.Logs().Len()
		if err := s.WriteBrain("a-copy.yaml", copied); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(copyPath)
		refused(mark)
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if code, err := s.Stop(ctx, syscall.SIGTERM); err != nil || code != 0 {
			t.Fatalf("SIGTERM: exit %d, %v", code, err)
		}
		mark = s.Logs().Len()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		refused(mark)
		if got := wantText(t, ask(t, s, "narrator", 703, "still you?")); got != "You said: still you? (message 2)" {
			t.Errorf("after the restart = %q, want the original's conversation going on", got)
		}
		if reqs := s.Model.Requests(); strings.Contains(reqs[len(reqs)-1].System, "COPY") {
			t.Error("the copy's persona answered")
		}
	})

	t.Run("a message cut short by a crash is answered after the start, under its id, and the model sees it once", func(t *testing.T) {
		wantText(t, ask(t, s, "narrator", 702, "first"))
		s.Model.Hold("#cut")
		mark := s.Logs().Len()
		pending := s.Send("narrator", 702, "second #cut")
		cut := waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "claude: event" && l.Int("user") == 702 })
		// The crash comes once the CLI has the message in its session's
		// transcript, and the model is answering it.
		for deadline := time.Now().Add(waitLong); !modelHas(s.Model, "second #cut") || !transcriptHas(s.DataDir, "second #cut"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the CLI never recorded the message, or the model never got it")
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if _, err := s.Stop(ctx, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// As systemd ends the unit's whole control group.
		for _, p := range claudetest.ProcessesUnder(s.DataDir) {
			_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		}
		s.Model.Hold("")
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := pending.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := wantText(t, r); got != "You said: second #cut (message 2)" {
			t.Errorf("reply after the crash = %q, want message 2 of the conversation: the message once in it", got)
		}
		if id := r.Summary.Str("request_id"); id != cut.Str("request_id") {
			t.Errorf("request_id %q after the start, %q before the crash: want one", id, cut.Str("request_id"))
		}
		waitLogFrom(t, s, mark, func(l stack.Line) bool {
			return l.Msg == "claude: message sent before; its unfinished turn is dropped from the session" && l.Str("request_id") == cut.Str("request_id")
		})
	})

	t.Run("every log line about a message names its bot, user, chat and request", func(t *testing.T) {
		lines := s.Logs().Find(0, func(l stack.Line) bool {
			_, user := l.Fields["user"]
			_, request := l.Fields["request_id"]
			return user || request
		})
		if len(lines) < 50 {
			t.Fatalf("only %d log lines about messages: the check below would prove little", len(lines))
		}
		for _, l := range lines {
			for _, key := range []string{"bot", "user", "chat", "request_id"} {
				if _, ok := l.Fields[key]; !ok {
					t.Errorf("log line without %s: %s", key, l.Raw)
				}
			}
		}
	})

	t.Run("tokens and keys are absent from all logs", func(t *testing.T) {
		fileLog, err := os.ReadFile(s.LogFile)
		if err != nil {
			t.Fatal(err)
		}
		logs := s.Logs().Text() + string(fileLog)
		secrets := []string{stack.OpenAIKey, claudetest.APIKey}
		for _, id := range []string{"narrator", "speaker", "painter", "private", "sleepy", "poet"} {
			secrets = append(secrets, stack.Token(id), strings.SplitN(stack.Token(id), ":", 2)[1])
		}
		for _, secret := range secrets {
			if len(secret) >= 8 && strings.Contains(logs, secret) {
				t.Errorf("a log contains the secret %q", secret)
			}
		}
		if !strings.Contains(logs, `"msg":"request"`) {
			t.Error("the logs hold no request summary: the check above would prove nothing")
		}
	})
}

// refusedCalls are the warn lines of tool calls refused for a user's
// requests.
func refusedCalls(s *stack.Stack, user int64) []stack.Line {
	return s.Logs().Find(0, func(l stack.Line) bool {
		return l.Msg == "tool call refused" && l.Level == "warn" && l.Int("user") == user && l.Str("request_id") != ""
	})
}

// organised lists the generated files in an organised output folder,
// leaving out their sidecars (<file>.json, see readSidecar).
func organised(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("organised folder: %v", err)
	}
	var files []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), output.SidecarExt) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files
}

func waitLogFrom(t testing.TB, s *stack.Stack, from int, match func(stack.Line) bool) stack.Line {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var found stack.Line
	_, err := s.Logs().WaitFrom(ctx, from, func(lines []stack.Line) bool {
		for _, l := range lines {
			if match(l) {
				found = l
				return true
			}
		}
		return false
	}, nil)
	if err != nil {
		t.Fatalf("log line never came: %v\n%s", err, s.Logs().Tail(10))
	}
	return found
}

// waitNoCLI waits until no Claude CLI the stack's brainbot started runs
// session.
func waitNoCLI(t *testing.T, s *stack.Stack, session string) {
	t.Helper()
	waitCLIs(t, s, "", "the processes of session "+session+" ended", func(now map[string]int) bool {
		_, left := now[session]
		return !left
	})
}

// testLogs copies brainbot's logs to the test log when -v is given.
func testLogs(tb testing.TB) io.Writer {
	if !testing.Verbose() {
		return nil
	}
	return tbWriter{tb}
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// modelHas reports whether the model was asked with text as the user's
// last words.
func modelHas(m *claudetest.Model, text string) bool {
	for _, r := range m.Requests() {
		for _, msg := range r.Messages {
			for _, b := range msg.Content {
				if msg.Role == "user" && b.Text == text {
					return true
				}
			}
		}
	}
	return false
}

// transcriptHas reports whether a Claude CLI session transcript under dir
// holds text.
func transcriptHas(dir, text string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return nil
		}
		data, err := os.ReadFile(path)
		found = err == nil && bytes.Contains(data, []byte(text))
		return nil
	})
	return found
}
