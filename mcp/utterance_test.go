package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"brainbot/mcp/audio"
	"brainbot/mcp/openaitest"
	"brainbot/toolspec"
)

// story is n sentences of about 60 characters.
func story(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "Sentence %d goes on for a while, as stories do. ", i)
	}
	return strings.TrimSpace(b.String())
}

// An answer written a few characters at a time is spoken in parts of whole
// sentences as they complete, with the request's settings; the parts are
// all of it, in order, and join into one playable file.
func TestUtteranceSpeaksCompletePartsAsTheyAreWritten(t *testing.T) {
	f := newFixture(t)
	u := NewSpeaker(f.cfg).Begin(context.Background(), toolspec.SpeechSettings{Voice: "marin", Format: "opus", Speed: 1.25})
	defer u.Cancel()
	text := story(12)
	for i := 7; i < len(text); i += 7 {
		u.Write(text[:i])
	}
	u.mu.Lock()
	started := len(u.parts) // parts begun before the text was complete
	u.mu.Unlock()
	u.Finish(text)
	notes, parts, err := u.Audio(context.Background(), 0)
	if err != nil || len(notes) != 1 {
		t.Fatalf("%d notes, %v: want one", len(notes), err)
	}
	if d, err := audio.OggOpusDuration(notes[0]); err != nil || d <= 0 {
		t.Errorf("not playable Ogg Opus: %v %v", d, err)
	}
	reqs := f.oa.Requests()
	var inputs []string
	for _, r := range reqs {
		if r.Voice != "marin" || r.Speed != 1.25 || r.Format != "opus" {
			t.Errorf("part spoken with %+v, want the request's settings", r)
		}
		inputs = append(inputs, r.Input)
	}
	// Concurrent parts may reach the stand-in in any order; each is one of
	// the cuts, and the cuts in order are the text.
	if parts != len(reqs) || parts < 3 {
		t.Fatalf("%d parts, %d requests: want one request a part, several parts", parts, len(reqs))
	}
	if started == 0 {
		t.Error("no part was begun before the text was complete")
	}
	joined := 0
	for _, in := range inputs {
		joined += len(in) + 1
		if n := utf8.RuneCountInString(in); n > partChars+60 {
			t.Errorf("part of %d characters: %q", n, in)
		}
		if !strings.HasSuffix(in, ".") {
			t.Errorf("part %q does not end a sentence", in)
		}
	}
	if joined-1 != len(text) {
		t.Errorf("parts hold %d bytes, the text %d", joined-1, len(text))
	}
	if got := u.Spoken(); got != utf8.RuneCountInString(text)-(parts-1) {
		t.Errorf("Spoken() = %d, want every character but the spaces between parts", got)
	}
}

// A final text that does not go on from what was streamed is spoken anew,
// whole; what was spoken before still counts.
func TestUtteranceFinishedWithOtherTextStartsOver(t *testing.T) {
	f := newFixture(t)
	u := NewSpeaker(f.cfg).Begin(context.Background(), toolspec.SpeechSettings{})
	defer u.Cancel()
	u.Write(story(4) + " ")
	u.Finish("Something else entirely.")
	if _, parts, err := u.Audio(context.Background(), 0); err != nil || parts != 1 {
		t.Fatalf("parts %d, err %v: want the new text in one part", parts, err)
	}
	if !slices.ContainsFunc(f.oa.Requests(), func(r openaitest.Request) bool { return r.Input == "Something else entirely." }) {
		t.Errorf("the final text was not spoken: %+v", f.oa.Requests())
	}
}

// One part that fails fails the whole: never a file with a hole.
func TestUtteranceWithAFailedPartFails(t *testing.T) {
	f := newFixture(t)
	u := NewSpeaker(f.cfg).Begin(context.Background(), toolspec.SpeechSettings{})
	defer u.Cancel()
	text := story(8)
	cut := strings.Index(text, "Sentence 5")
	u.Write(text[:cut])
	u.Finish(text[:cut] + "Sentence 5 #openai-500 fails. " + text[cut:])
	notes, _, err := u.Audio(context.Background(), 0)
	if err == nil || notes != nil {
		t.Fatalf("a failed part gave %d notes, err %v", len(notes), err)
	}
	if !strings.Contains(err.Error(), "speech part") {
		t.Errorf("error %v does not say which part failed", err)
	}
}

// Cancel stops what is in flight; Audio then fails. What was made stays
// counted.
func TestUtteranceCancelledKeepsWhatWasSpoken(t *testing.T) {
	f := newFixture(t)
	sp := NewSpeaker(f.cfg)
	u := sp.Begin(context.Background(), toolspec.SpeechSettings{})
	u.Write(story(6) + " ")
	u.Cancel()
	if _, _, err := u.Audio(context.Background(), 0); err == nil {
		t.Error("a cancelled utterance gave audio")
	}

	u = sp.Begin(context.Background(), toolspec.SpeechSettings{})
	text := story(6)
	u.Finish(text)
	if _, _, err := u.Audio(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	u.Cancel()
	if got, parts := u.Spoken(), len(u.parts); got != utf8.RuneCountInString(text)-(parts-1) {
		t.Errorf("Spoken() = %d after Cancel, want all %d characters of the %d parts made", got, utf8.RuneCountInString(text), parts)
	}
}

func TestCutPoint(t *testing.T) {
	long := strings.Repeat("word ", 40) // 200 characters without a sentence end
	for _, tc := range []struct {
		name, text string
		want       string
	}{
		{"too short", "Hello there. How are you? ", ""},
		{"a sentence not yet ended", long + "and on", ""},
		{"a sentence end after enough", long + "end. Next", long + "end."},
		{"a period without a space may go on", long + "pi is 3.14", ""},
		{"a paragraph", strings.Repeat("x", paragraphChars) + "\nmore", strings.Repeat("x", paragraphChars) + "\n"},
		{"a short line is no paragraph", "Hi!\nThere", ""},
		{"no end within one call", strings.Repeat("word ", MaxSpeechInput/5+10), strings.Repeat("word ", MaxSpeechInput/5)},
	} {
		if got := tc.text[:cutPoint(tc.text)]; got != tc.want {
			t.Errorf("%s: cut %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Audio longer than one voice note holds is joined into several, in
// order, each of whole parts and within the limit; together they hold all
// of it.
func TestUtteranceLongerThanOneNoteMakesSeveral(t *testing.T) {
	f := newFixture(t)
	u := NewSpeaker(f.cfg).Begin(context.Background(), toolspec.SpeechSettings{Format: "opus"})
	defer u.Cancel()
	text := story(20)
	u.Finish(text)
	one, parts, err := u.Audio(context.Background(), 0)
	if err != nil || len(one) != 1 {
		t.Fatalf("%d notes, %v", len(one), err)
	}
	limit := len(one[0])/3 + 200
	notes, _, err := u.Audio(context.Background(), limit)
	if err != nil || len(notes) < 3 || len(notes) > parts {
		t.Fatalf("%d notes of %d parts for a limit of a third, %v", len(notes), parts, err)
	}
	var total time.Duration
	for i, n := range notes {
		if len(n) > limit {
			t.Errorf("note %d holds %d bytes, over the limit %d", i, len(n), limit)
		}
		d, err := audio.OggOpusDuration(n)
		if err != nil {
			t.Fatalf("note %d: %v", i, err)
		}
		total += d
	}
	// Each note skips its decoder's pre-roll (a few ms) once.
	if whole, _ := audio.OggOpusDuration(one[0]); (total - whole).Abs() > time.Duration(len(notes))*20*time.Millisecond {
		t.Errorf("the notes last %v together, the whole %v", total, whole)
	}
}

// A final text shortened after it was streamed (a panel's length cap)
// keeps the parts it goes on from, even one cut at a line break the
// final text no longer has, and speaks only the rest: no part twice, no
// word past the cut, and a remainder with nothing to say (the cap's "…"
// alone) is not sent. What was spoken for the dropped text counts.
func TestUtteranceFinishedShorterKeepsThePartsItGoesOnFrom(t *testing.T) {
	f := newFixture(t)
	u := NewSpeaker(f.cfg).Begin(context.Background(), toolspec.SpeechSettings{})
	defer u.Cancel()
	para := strings.Repeat("Cars clog the streets and the air ", 2) + "in every city\n"
	streamed := para + story(8) + " More words follow"
	u.Write(streamed)
	u.mu.Lock()
	early := slices.Clone(u.parts)
	u.mu.Unlock()
	if len(early) < 2 {
		t.Fatalf("%d parts begun while streaming, want 2 or more", len(early))
	}
	for _, p := range early {
		<-p.made // made, then dropped: billed all the same
	}
	u.Finish(strings.TrimSpace(para) + "…")
	notes, parts, err := u.Audio(context.Background(), 0)
	if err != nil || len(notes) != 1 || parts != 1 {
		t.Fatalf("%d notes of %d parts, %v: want the kept paragraph, as streamed", len(notes), parts, err)
	}
	var inputs []string
	for _, r := range f.oa.Requests() {
		inputs = append(inputs, r.Input)
	}
	if slices.Contains(inputs, "…") || slices.Contains(inputs, strings.TrimSpace(para)+"…") {
		t.Errorf("spoken again or the cap's mark alone: %q", inputs)
	}
	made := 0
	for _, in := range inputs {
		made += utf8.RuneCountInString(in)
	}
	if got := u.Spoken(); got != made || got <= utf8.RuneCountInString(para) {
		t.Errorf("Spoken() = %d, want all %d characters made, the dropped parts' too", got, made)
	}
}

// An utterance bounded by MaxChars speaks no more than that many
// characters of a long answer, whether it comes as it is written or
// whole: the last part ends at the last sentence within the bound, and
// nothing after it reaches OpenAI.
func TestUtteranceStopsAtItsBound(t *testing.T) {
	text := story(40) // about 2,000 characters
	const bound = 500
	for _, written := range []bool{true, false} {
		t.Run(fmt.Sprintf("written=%v", written), func(t *testing.T) {
			f := newFixture(t)
			u := NewSpeaker(f.cfg).Begin(context.Background(), toolspec.SpeechSettings{MaxChars: bound})
			defer u.Cancel()
			if written {
				for i := 7; i < len(text); i += 7 {
					u.Write(text[:i])
				}
			}
			u.Finish(text)
			notes, parts, err := u.Audio(context.Background(), 0)
			if err != nil || len(notes) != 1 {
				t.Fatalf("%d notes, %v: want one", len(notes), err)
			}
			var inputs []string
			for _, r := range f.oa.Requests() {
				inputs = append(inputs, r.Input)
			}
			// Parts reach the stand-in in any order: put them in the text's.
			slices.SortFunc(inputs, func(a, b string) int { return strings.Index(text, a) - strings.Index(text, b) })
			spoken := strings.Join(inputs, " ")
			if n := utf8.RuneCountInString(spoken) - (len(inputs) - 1); n > bound || n < bound-60 || u.Spoken() != n {
				t.Errorf("spoken %d characters in %d parts (Spoken() = %d), want up to the last sentence within %d", n, parts, u.Spoken(), bound)
			}
			if !strings.HasPrefix(text, spoken) || !strings.HasSuffix(spoken, ".") {
				t.Errorf("spoken %q, want the text's beginning up to a sentence end", spoken)
			}
		})
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		text string
		max  int
		want string
	}{
		{"Short.", 10, "Short."},
		{"One. Two three.", 12, "One."},
		{"One two three four.", 12, "One two"},
		{"One two three four.", 7, "One two"},
		{"Unbreakable", 5, ""},
		{"Anything", 0, ""},
		{"Ça va? Très bien.", 9, "Ça va?"},
	} {
		if got := within(tt.text, tt.max); got != tt.want {
			t.Errorf("within(%q, %d) = %q, want %q", tt.text, tt.max, got, tt.want)
		}
	}
}
