package conversation

// Taps at the ports: what each tap is answered with (the notice only its
// user sees), what it goes on as, and what follows in the chat.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/pricing"
	"brainbot/toolspec"
)

// tapOn is user's tap on the button with data under message messageID of
// kitGroup.
func (k *kit) tapOn(user int64, messageID int, data string) *message.Inbound {
	in := k.inGroup(user, "Ann", "")
	in.Kind, in.MessageID = message.Tapped, messageID
	in.Tap = message.Tap{QueryID: fmt.Sprintf("query-%d", in.ID), Data: data}
	return in
}

// tap taps and returns the words it goes on as (chosen) and the notice it
// was answered with.
func (k *kit) tap(in *message.Inbound) (words string, chosen bool, notice string) {
	k.t.Helper()
	u, chosen := k.p.Tap(context.Background(), in)
	answers := k.ev.Of("out")
	for _, a := range slices.Backward(answers) {
		if rest, ok := strings.CutPrefix(a, "tap answered "); ok {
			fmt.Sscanf(rest, "%q", &notice)
			return u.Text, chosen, notice
		}
	}
	k.t.Fatal("the tap was not answered")
	return
}

// A question's option tapped: the asker's first tap goes on as their
// words and shows under the question; every other tap is answered with
// why it does nothing.
func TestQuestionTaps(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	k := newKit(t, "", func(c *Config) { c.Now = clock })
	k.agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		args, _ := json.Marshal(toolspec.QuestionArgs{Question: "Tea or coffee?", Options: []string{"Tea", "Coffee"}})
		return &claude.Result{Answered: true, SessionID: "session-1", ToolCalls: []claude.ToolCall{{
			Server: toolspec.QuestionServer, Tool: toolspec.QuestionToolName, Input: args, Outcome: claude.ToolOK}}}, nil
	}
	k.serve(k.inGroup(kitUser, "Ann", "what should I drink?"))
	under, coffee := 1, k.chats.buttons[1]
	id := buttonsID(t, coffee)

	for _, c := range []struct {
		name          string
		user          int64
		messageID     int
		data, notice  string
		words         string
		later, expire bool
	}{
		{name: "forged", user: kitUser, messageID: under, data: id + ".7", notice: NoticeGone},
		{name: "under another message", user: kitUser, messageID: under + 1, data: coffee, notice: NoticeGone},
		{name: "not the asker", user: 8, messageID: under, data: coffee, notice: NoticeNotAsked},
		{name: "the asker", user: kitUser, messageID: under, data: coffee, words: "Coffee"},
		{name: "again", user: kitUser, messageID: under, data: coffee, notice: NoticeAnswered},
		{name: "expired", user: kitUser, messageID: under, data: coffee, notice: NoticeExpired, expire: true},
	} {
		if c.expire {
			mu.Lock()
			now = now.Add(k.brain.Buttons.MaxAge.D() + time.Minute)
			mu.Unlock()
		}
		words, chosen, notice := k.tap(k.tapOn(c.user, c.messageID, c.data))
		if words != c.words || chosen != (c.words != "") || notice != c.notice {
			t.Errorf("%s: went on as %q (%v), answered %q; want %q, %q", c.name, words, chosen, notice, c.words, c.notice)
		}
	}
	if !slices.Contains(k.ev.Of("out"), fmt.Sprintf("amend %d %q", under, "→ Coffee")) {
		t.Errorf("the choice is not shown under the question: %q", k.ev.Of("out"))
	}
}

// fakeSpeaker speaks any text as a few bytes of "MP3".
type fakeSpeaker struct{}

func (fakeSpeaker) Speak(ctx context.Context, text string, settings toolspec.SpeechSettings) ([]byte, string, int, error) {
	return []byte("mp3 " + text), ".mp3", len(text), nil
}

// failingSpeaker has OpenAI speak some of the text, then fail.
type failingSpeaker struct{ spoken int }

func (f failingSpeaker) Speak(context.Context, string, toolspec.SpeechSettings) ([]byte, string, int, error) {
	return nil, "", f.spoken, errors.New("speech: server_error")
}

// A reading that fails after OpenAI spoke part of the answer still pays
// for what it spoke, and the user is told of the failure.
func TestReadAloudFailurePaysForWhatWasSpoken(t *testing.T) {
	k := newKit(t, "tts:\n  user_toggle: true\n", func(c *Config) { c.Speaker = failingSpeaker{spoken: 400} })
	k.serve(k.inGroup(kitUser, "Ann", "hello"))
	read := k.chats.buttons[0]
	k.tap(k.tapOn(8, 1, read))
	var paid float64
	var failed int64
	for _, u := range k.usage() {
		if u.Mode == claude.Speech.String() {
			paid += u.OpenAIUSD
			failed += u.Errors
		}
	}
	if want, _ := pricing.Speech(toolspec.DefaultSpeechModel, 400); paid != want || failed != 1 {
		t.Errorf("paid %v for a failed reading (%d errors), want %v for the 400 characters spoken", paid, failed, want)
	}
}

// A text answer of a bot that speaks goes under 🔊; its first tap reads it
// aloud as a voice note quoting it, paid for, and takes the button away.
func TestReadAloudTap(t *testing.T) {
	k := newKit(t, "tts:\n  user_toggle: true\n", func(c *Config) { c.Speaker = fakeSpeaker{} })
	k.serve(k.inGroup(kitUser, "Ann", "hello"))
	k.want("out", `attach ["🔊"]`, `text "Hello, Ann." formatted=true`)
	read := k.chats.buttons[0]

	if _, chosen, notice := k.tap(k.tapOn(8, 1, read)); chosen || notice != NoticeReading {
		t.Errorf("first tap: chosen %v, answered %q", chosen, notice)
	}
	out := k.ev.Of("out")
	last := out[len(out)-3:]
	if last[0] != "quote 1" || !strings.HasPrefix(last[1], fmt.Sprintf("file %d audio-output/bot-alpha/user-8/", message.VoiceNote)) ||
		last[2] != "drop buttons 1" {
		t.Errorf("after the tap: %q", last)
	}
	if _, _, notice := k.tap(k.tapOn(kitUser, 1, read)); notice != NoticeRead {
		t.Errorf("second tap answered %q", notice)
	}
	var reads int64
	for _, u := range k.usage() {
		if u.Mode == claude.Speech.String() && u.OpenAIUSD > 0 {
			reads += u.Requests
		}
	}
	if reads != 1 {
		t.Errorf("%d readings paid for, want 1: %+v", reads, k.usage())
	}
}
