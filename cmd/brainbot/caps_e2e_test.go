package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"brainbot/bot/brain"
	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/mcp/audio"
	"brainbot/pricing"
)

// thriftyBrain speaks every answer and lets a user spend one cent a day.
const thriftyBrain = `name: Thrifty
telegram:
  token_env: THRIFTY_TOKEN
system_prompt: You answer at length; your answers are read aloud.
tts:
  enabled: true
  model: tts-1
limits:
  per_user_daily_usd: 0.01
`

// spokenChars is how many characters OpenAI was asked to speak, in how
// many calls.
func spokenChars(s *stack.Stack) (chars, calls int) {
	for _, r := range s.OpenAI.Requests() {
		if strings.HasSuffix(r.Path, "/audio/speech") {
			chars += utf8.RuneCountInString(r.Input)
			calls++
		}
	}
	return chars, calls
}

// modelAskedAbout is how many of the model's requests have a last user
// message that mentions text, each told once.
func modelAskedAbout(m *claudetest.Model, text string) int {
	seen := map[string]bool{}
	for _, r := range m.Requests() {
		for i := len(r.Messages) - 1; i >= 0; i-- {
			if r.Messages[i].Role != "user" {
				continue
			}
			for _, b := range r.Messages[i].Content {
				if strings.Contains(b.Text, text) {
					seen[b.Text] = true
				}
			}
			break
		}
	}
	return len(seen)
}

// lineList is lines' raw text, one a line.
func lineList(lines []stack.Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Raw + "\n")
	}
	return b.String()
}

// spent adds up what the summary lines say the requests cost, and finds
// the dearest of them.
func spent(lines []stack.Line) (total, dearest float64) {
	for _, l := range lines {
		usd := l.Float("cost_usd") + l.Float("openai_usd")
		total += usd
		dearest = max(dearest, usd)
	}
	return total, dearest
}

// One user who asks a voice bot with a per-user cap in their private
// chat, in three groups and as a guest in a fourth, all at once, gets one
// answer whose speech stops at the cap, and the cap's reply everywhere
// else: the answers under way count against the cap. Before, each passed
// the check as it started, and all five were answered in full.
func TestEndToEndParallelAnswersWithinTheCap(t *testing.T) {
	// Room for all five at once, as an instance with more memory has.
	s := newStackWithPrepare(t, map[string]string{"thrifty.yaml": thriftyBrain}, []string{"BRAINBOT_MAX_CLAUDE=8"}, nil)
	const user = 4601
	token := stack.Token("thrifty")
	resume := s.Model.Pause()
	defer resume()
	from := s.Logs().Len()
	s.SendMessage("thrifty", user, map[string]any{"text": "tell me everything #long private"})
	groups := []int64{-1004601, -1004602, -1004603}
	for i, g := range groups {
		s.Telegram.SendMessage(token, groupMessage(user, g, fmt.Sprintf("tell me everything #long group %d", i), "@"+telegramtest.Username(token)))
	}
	s.Telegram.SummonAsGuest(token, user, -1004604, "tell me everything #long as a guest")
	const asked = 5

	// Each message either reaches the (paused) model or waits for the
	// answer under way.
	for deadline := time.Now().Add(waitLong); ; time.Sleep(20 * time.Millisecond) {
		waiting := len(s.Logs().Find(from, func(l stack.Line) bool {
			return l.Msg == "spending cap: waiting for the answers under way to end" && l.Int("user") == user
		}))
		if waiting+modelAskedAbout(s.Model, "tell me everything #long") >= asked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages waiting for room under the cap, the model asked about the others: want %d\n%s", waiting, asked, s.Logs().Tail(20))
		}
	}
	resume()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	all, err := s.Logs().WaitFrom(ctx, from, func(ls []stack.Line) bool { return len(stack.Summaries(ls, "thrifty", user)) >= asked }, nil)
	if err != nil {
		t.Fatalf("not every message answered: %v\n%s", err, s.Logs().Tail(20))
	}
	lines := stack.Summaries(all, "thrifty", user)

	total, dearest := spent(lines)
	const capUSD = 0.01
	if total > capUSD+dearest {
		t.Errorf("the user's %d answers cost $%.4f, more than the cap $%.2f and one answer ($%.4f):\n%s", len(lines), total, capUSD, dearest, lineList(lines))
	}
	answered, capped := 0, 0
	for _, l := range lines {
		switch l.Str("outcome") {
		case "ok":
			answered++
		case "spending cap":
			capped++
		}
		if l.Float("openai_usd") > capUSD {
			t.Errorf("an answer's speech cost $%.4f, past the cap $%.2f: %s", l.Float("openai_usd"), capUSD, l.Raw)
		}
	}
	if answered != 1 || capped != asked-1 {
		t.Errorf("%d answered, %d told the cap is reached; want 1 and %d:\n%s", answered, capped, asked-1, lineList(lines))
	}
	perChar, _ := pricing.Speech("tts-1", 1)
	if chars, _ := spokenChars(s); float64(chars)*perChar > capUSD {
		t.Errorf("OpenAI spoke %d characters ($%.4f), past the cap", chars, float64(chars)*perChar)
	}
}

// wantCutNote asserts that r is a voice note of part of the #long answer,
// followed by all of its text.
func wantCutNote(t *testing.T, r stack.Reply) {
	t.Helper()
	got := r.Methods()
	if len(got) < 2 || got[0] != "sendVoice" || slices.Contains(got[1:], "sendVoice") {
		t.Fatalf("want one voice note and the text after it, got %v\n%s", got, r.Summary.Raw)
	}
	if n := utf8.RuneCountInString(strings.Join(r.Texts(), "")); n < claudetest.LongReplyLength-100 {
		t.Errorf("the text after the note holds %d characters, want all %d of the answer", n, claudetest.LongReplyLength)
	}
}

// A long voice answer is spoken up to tts.max_chars, ending at a sentence
// within it, whether it is spoken while the model writes or once it is
// written: the speech calls OpenAI got hold no more, and the one voice
// note sent is of that, followed by all of the answer as text. Before,
// all 6,000 characters were spoken.
func TestEndToEndLongVoiceStaysWithinItsBound(t *testing.T) {
	// Short names: the admin socket's path, in the test's folder, must fit.
	for _, tt := range []struct{ name, early string }{{"early", "on"}, {"late", "off"}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStackWith(t, []string{"BRAINBOT_SPEECH_EARLY=" + tt.early})
			const user = 4611
			r := ask(t, s, "speaker", user, "tell me everything #long")
			wantCutNote(t, r)
			chars, calls := spokenChars(s)
			if chars > brain.DefaultMaxSpokenChars || chars < brain.DefaultMaxSpokenChars-300 {
				t.Errorf("OpenAI spoke %d characters in %d calls of a %d-character answer, want up to the bound %d",
					chars, calls, claudetest.LongReplyLength, brain.DefaultMaxSpokenChars)
			}
			perChar, _ := pricing.Speech("tts-1", 1)
			if usd := r.Summary.Float("openai_usd"); usd > perChar*brain.DefaultMaxSpokenChars+1e-9 || usd <= 0 {
				t.Errorf("summary's openai_usd %g, want what %d characters cost at most", usd, brain.DefaultMaxSpokenChars)
			}
			// The stand-in speaks 60 ms a character: the note is as long as
			// what was spoken, not as the answer.
			note := organised(t, filepath.Join(s.DataDir, "audio-output", "bot-speaker", fmt.Sprintf("user-%d", user)))
			if len(note) != 1 {
				t.Fatalf("organised %v, want one note", note)
			}
			data, err := os.ReadFile(note[0])
			if err != nil {
				t.Fatal(err)
			}
			if d, err := audio.MP3Duration(data); err != nil || d > time.Duration(brain.DefaultMaxSpokenChars)*60*time.Millisecond+time.Second {
				t.Errorf("the note lasts %v (%v), longer than %d characters take", d, err, brain.DefaultMaxSpokenChars)
			}
		})
	}
}

// frugalBrain speaks every answer, however long, and the whole bot may
// spend two cents a day.
const frugalBrain = `name: Frugal
telegram:
  token_env: FRUGAL_TOKEN
system_prompt: You answer at length; your answers are read aloud.
tts:
  enabled: true
  model: tts-1
  max_chars: 0
limits:
  daily_usd: 0.02
`

// A voice answer's speech stops where the bot's cap is reached: OpenAI is
// asked to speak no more than the cap buys, and the note holds that much.
// The cap then answers everyone, and /metrics shows nothing held once
// the answer is over. Before, all 6,000 characters were spoken ($0.09).
func TestEndToEndSpeechStopsAtTheBotsCap(t *testing.T) {
	s := newStackWithBrains(t, map[string]string{"frugal.yaml": frugalBrain})
	r := ask(t, s, "frugal", 4621, "tell me everything #long")
	wantCutNote(t, r)
	const capUSD = 0.02
	perChar, _ := pricing.Speech("tts-1", 1)
	chars, calls := spokenChars(s)
	if most := int(capUSD / perChar); chars > most || chars < most-300 {
		t.Errorf("OpenAI spoke %d characters in %d calls, want up to the %d the cap buys", chars, calls, most)
	}
	if usd := r.Summary.Float("openai_usd"); usd > capUSD {
		t.Errorf("the speech cost $%g, past the cap $%g", usd, capUSD)
	}
	if got := ask(t, s, "frugal", 4622, "and me?"); !strings.HasPrefix(strings.Join(got.Texts(), ""), "I can't answer any more messages today") {
		t.Errorf("another user got %q after the cap was spent, want the cap's reply", got.Texts())
	}
	_, metrics := get(t, "http://"+adminAddr(t, s)+"/metrics")
	if !strings.Contains(metrics, `brainbot_reserved_usd{bot="frugal"} 0`) {
		t.Errorf("/metrics shows %q, want nothing held", grepLines(metrics, "brainbot_reserved_usd"))
	}
}

// readerBrain answers in text under a 🔊 button.
const readerBrain = `name: Reader
telegram:
  token_env: READER_TOKEN
system_prompt: You answer in writing.
tts:
  user_toggle: true
  model: tts-1
  max_chars: 0
`

// A tap on 🔊 near the user's cap reads the answer aloud only as far as
// the room left buys: OpenAI is asked to speak no more, and the note sent
// holds that much. Before, the tap read all of it.
func TestEndToEndReadAloudStopsAtTheCap(t *testing.T) {
	s := newStackWithBrains(t, map[string]string{"reader.yaml": readerBrain})
	const user = 4631
	var words []string
	for i := 1; len(strings.Join(words, " ")) < 1500; i++ {
		words = append(words, fmt.Sprintf("Sentence %d of a question long enough to be read aloud for a while.", i))
	}
	r := ask(t, s, "reader", user, strings.Join(words, " "))
	answer, labels, data := question(t, r)
	if len(labels) != 1 {
		t.Fatalf("the answer carries %v, want 🔊", labels)
	}
	// The cap leaves $0.006 beside what the answer cost: 400 characters of
	// tts-1 speech.
	const room = 0.006
	capped := readerBrain + fmt.Sprintf("limits:\n  per_user_daily_usd: %.6f\n", r.Summary.Float("cost_usd")+r.Summary.Float("openai_usd")+room)
	mark := s.Logs().Len()
	if err := s.WriteBrain("reader.yaml", capped); err != nil {
		t.Fatal(err)
	}
	waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "brain loaded" && l.Str("bot") == "reader" })

	if notice := waitAnswer(t, s, "reader", s.Tap("reader", user, user, answer.MessageID, data[0])); notice != conversation.NoticeReading {
		t.Fatalf("the tap on 🔊 answered %q", notice)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := s.Telegram.WaitCall(ctx, stack.Token("reader"), func(c telegramtest.Call) bool { return c.Method == "sendVoice" }); err != nil {
		t.Fatal(err)
	}
	perChar, _ := pricing.Speech("tts-1", 1)
	if chars, calls := spokenChars(s); chars > int(room/perChar) || chars < int(room/perChar)-100 {
		t.Errorf("OpenAI spoke %d characters in %d calls of a %d-character answer, want up to the %d the room buys",
			chars, calls, utf8.RuneCountInString(stack.Rendered(answer)), int(room/perChar))
	}
}
