package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// stream writes text to q.OnText a word at a time, as the model's text
// deltas come, and notes what the member's voice of the turn had been
// given before the last one.
func (f *fakes) stream(q Question, text string) {
	words := strings.SplitAfter(text, " ")
	for i := range words {
		if i == len(words)-1 {
			f.mu.Lock()
			v := f.voices[slices.IndexFunc(f.voices, func(v *fakeVoice) bool { return v.member == q.Member && v.finished == nil })]
			f.beforeLast[fmt.Sprintf("%s/%d", q.Member, q.Turn)] = slices.Clone(v.writes)
			f.mu.Unlock()
		}
		q.OnText(strings.Join(words[:i+1], ""))
	}
}

// speech is n sentences of about 50 characters.
func speech(member string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s says thing %d, and says it well. ", member, i)
	}
	return strings.TrimSpace(b.String())
}

// A panel that speaks hands each member's answer and reply to its voice
// while the model writes them, before the turn's last words: only text
// the engine keeps, each a prefix of the text it then finishes with.
// Turn 2's comment, a structured choice, is spoken once it is in.
func TestMemberSpokenWhileItsTurnStreams(t *testing.T) {
	f := newFakes()
	f.answer = func(ctx context.Context, member string, turn, attempt int) (Answer, error) {
		if turn == 2 {
			return structured(map[string]string{"a": "b", "b": "a"}[member], member+" on the other"), nil
		}
		return Answer{Text: speech(member, 6), CostUSD: 0.01}, nil
	}
	e := newEngine(t, f)
	run := newRun("a", "b")
	run.Speak = true
	rep, err := e.Run(context.Background(), run)
	if err != nil || rep.Answers != 2 || rep.Comments != 2 || rep.Replies != 2 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	for _, key := range []string{"a/1", "b/1", "a/3", "b/3"} {
		if got := f.beforeLast[key]; len(got) == 0 || !strings.HasPrefix(got[len(got)-1], speech(key[:1], 5)) {
			t.Errorf("%s: the voice had %q before the model's last words, want all but them", key, got)
		}
	}
	if _, streamed := f.beforeLast["a/2"]; streamed {
		t.Error("turn 2's structured answer was streamed to the voice")
	}
	for _, v := range f.voices {
		if v.finished == nil {
			t.Fatalf("%s's voice never finished", v.member)
		}
		for _, w := range v.writes {
			if !strings.HasPrefix(*v.finished, w) {
				t.Errorf("%s's voice was given %q, not a prefix of what it finished with: %q", v.member, w, *v.finished)
			}
		}
	}
	if it := run.item(1, "a"); it.File == "" || it.OpenAIUSD < 0.005 {
		t.Errorf("a's answer: file %q, openai_usd %v: want the speech made while streaming billed", it.File, it.OpenAIUSD)
	}
}

// An answer longer than its cap is clipped at a word: the voice is only
// ever given words the clipped text holds, and finishes with it.
func TestShortenedTurnSpeaksOnlyWhatIsKept(t *testing.T) {
	f := newFakes()
	long := speech("a", 20) // about 1,000 characters
	f.answer = func(ctx context.Context, member string, turn, attempt int) (Answer, error) {
		if turn == 1 {
			return Answer{Text: long}, nil
		}
		return Answer{}, errors.New("only turn 1 here")
	}
	e := newEngine(t, f)
	run := newRun("a", "b")
	run.Speak = true
	if _, err := e.Run(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	kept := run.item(1, "a").Text
	if utf8.RuneCountInString(kept) > run.MaxChars[0] || !strings.HasSuffix(kept, "…") {
		t.Fatalf("answer kept as %q", kept)
	}
	v := f.voices[slices.IndexFunc(f.voices, func(v *fakeVoice) bool { return v.member == "a" })]
	if v.finished == nil || *v.finished != kept {
		t.Fatalf("voice finished with %v, want the clipped answer %q", v.finished, kept)
	}
	if len(v.writes) == 0 {
		t.Fatal("the voice was given nothing while the answer streamed")
	}
	last := v.writes[len(v.writes)-1]
	if !strings.HasPrefix(kept, last) || utf8.RuneCountInString(last) < run.MaxChars[0]/2 {
		t.Errorf("the voice was last given %q: want most of the kept text, and nothing past it", last)
	}
}

// A speech failure fails the member's turn as before (it sits out the
// later turns, the panel's note names it), and the speech made for it
// while it streamed is billed all the same; a member whose model fails
// after some of its words were spoken keeps nothing, and is billed too.
func TestSpeechFailureWhileStreamingSitsOut(t *testing.T) {
	f := newFakes()
	f.speakErr["c"] = errors.New("openai 500")
	f.answer = func(ctx context.Context, member string, turn, attempt int) (Answer, error) {
		if member == "b" && turn == 1 {
			return Answer{Text: speech("b", 6)}, errors.New("the model failed at the end")
		}
		if turn == 2 {
			return structured("a", member+" on a"), nil
		}
		return Answer{Text: speech(member, 6), CostUSD: 0.01}, nil
	}
	e := newEngine(t, f)
	run := newRun("a", "b", "c")
	run.Speak = true
	rep, err := e.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.order(); slices.Contains(got, "1:c") || slices.Contains(got, "1:b") || len(f.notes) != 1 ||
		!slices.Equal(rep.SatOut, []string{"b (turn 1)", "c (turn 1)"}) {
		t.Errorf("chat order %v, notes %q, sat out %v", got, f.notes, rep.SatOut)
	}
	for _, m := range []string{"b", "c"} {
		it := run.item(1, m)
		if it.State != Failed || it.File != "" || it.OpenAIUSD == 0 {
			t.Errorf("%s: state %s, file %q, openai_usd %v: want failed, no file, its speech billed", m, it.State, it.File, it.OpenAIUSD)
		}
	}
	if v := f.voices[slices.IndexFunc(f.voices, func(v *fakeVoice) bool { return v.member == "b" })]; v.finished == nil || *v.finished != "" {
		t.Errorf("b's voice finished with %v, want nothing kept", v.finished)
	}
}

// What keeps hands over at any point of the stream is a prefix of what
// read and clip make of the whole text, whether the whole ends there, at
// the cap, or past it; and it grows with the stream.
func TestKeepsIsAPrefixOfTheKeptText(t *testing.T) {
	const limit = 60
	for _, whole := range []string{
		" " + speech("a", 3),
		"Short words end here.\nA new line comes next and a long tail of words follows it on and on",
		strings.Repeat("x", 40) + " " + strings.Repeat("y", 30),
		strings.Repeat("word ", 11) + "exact.", // 61 characters: one past the cap
	} {
		for end := 0; end <= len(whole); end++ {
			full := whole[:end]
			final := clip(strings.TrimSpace(full), limit)
			last := ""
			for i := 0; i <= len(full); i++ {
				got := keeps(full[:i], limit)
				if !strings.HasPrefix(final, got) || !strings.HasPrefix(got, last) {
					t.Fatalf("keeps(%q) = %q: not a prefix of the kept %q, or shorter than %q", full[:i], got, final, last)
				}
				last = got
			}
		}
	}
}
