package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"brainbot/cmd/internal/stack"
	"brainbot/toolspec"
)

// A voice answer is spoken while the model writes it: OpenAI gets the
// first part of it before the model's last word, the parts are whole
// sentences that together are the whole answer, in order, and the user
// gets one voice note of all of it.
func TestEndToEndVoiceWhileWriting(t *testing.T) {
	s := newStack(t, nil)
	// About 640 characters a second: a second and a half for this answer,
	// most of it after its first part is complete.
	s.Model.SetPace(100 * time.Millisecond)
	const user = 941
	var sentences []string
	for i := 1; i <= 12; i++ {
		sentences = append(sentences, fmt.Sprintf("This is sentence number %d of a story told slowly, one word at a time.", i))
	}
	question := strings.Join(sentences, " ")
	answer := "You said: " + question + " (message 1)"

	r := ask(t, s, "speaker", user, question)
	if got := r.Methods(); len(got) != 1 || got[0] != "sendVoice" {
		t.Fatalf("want exactly one sendVoice and no text, got %v\n%s", got, r.Summary.Raw)
	}
	var inputs []string
	var firstSpeech time.Time
	for _, req := range s.OpenAI.Requests() {
		if strings.HasSuffix(req.Path, "/audio/speech") {
			if firstSpeech.IsZero() {
				firstSpeech = req.At
			}
			inputs = append(inputs, req.Input)
		}
	}
	if got := strings.Join(inputs, " "); got != answer {
		t.Fatalf("spoken in %d parts:\n%q\nwant the whole answer, in order:\n%q", len(inputs), got, answer)
	}
	if len(inputs) < 3 {
		t.Errorf("spoken in %d parts, want it cut into groups of sentences", len(inputs))
	}
	for _, in := range inputs[:len(inputs)-1] {
		if !strings.HasSuffix(in, ".") {
			t.Errorf("part %q does not end a sentence", in)
		}
	}
	var lastWord time.Time
	for _, d := range s.Model.TextDeltas() {
		if strings.Contains(answer, d.Text) && !d.At.Before(lastWord) {
			lastWord = d.At
		}
	}
	if lastWord.IsZero() || !firstSpeech.Before(lastWord) {
		t.Errorf("first speech request at %v, the model's last word at %v: want speech to start while the model writes",
			firstSpeech.Format(time.StampMicro), lastWord.Format(time.StampMicro))
	}
	if r.Summary.Str("outcome") != "ok" || r.Summary.Float("openai_usd") <= 0 {
		t.Errorf("summary = %s", r.Summary.Raw)
	}
	t.Logf("speech began %v before the model's last word", lastWord.Sub(firstSpeech))

	// One part OpenAI refuses fails the voice: the words come as text,
	// never a note with a gap.
	sentences[6] = "This sentence number 7 makes OpenAI fail #openai-500 today."
	question = strings.Join(sentences, " ")
	r = ask(t, s, "speaker", user+1, question)
	if got := r.Texts(); len(r.Calls) != 1 || len(got) != 1 || got[0] != "You said: "+question+" (message 1)" {
		t.Fatalf("after a failed part: %v %q, want the answer as one text", r.Methods(), got)
	}
	if r.Summary.Str("outcome") != "speech failed" {
		t.Errorf("summary = %s", r.Summary.Raw)
	}
}

// A voice answer whose audio passes what one voice note may hold (the Bot
// API's 50 MB) goes out as several notes, in order, cut between parts of
// whole sentences: together they are all of it.
func TestEndToEndVoiceLongerThanOneNote(t *testing.T) {
	s := newStack(t, nil)
	const part = 18 << 20 // each part's audio: three pass 50 MB, two do not
	s.OpenAI.SetSpeechBytes(part)
	const user = 942
	var sentences []string
	for i := 1; i <= 5; i++ {
		sentences = append(sentences, fmt.Sprintf("Sentence %d of a very long story is long enough to be heard, and it goes on a bit.", i))
	}
	r := ask(t, s, "speaker", user, strings.Join(sentences, " "))
	if got := r.Methods(); len(got) != 2 || got[0] != "sendVoice" || got[1] != "sendVoice" {
		t.Fatalf("want two voice notes and no text, got %v\n%s", got, r.Summary.Raw)
	}
	var parts int
	for _, req := range s.OpenAI.Requests() {
		if strings.HasSuffix(req.Path, "/audio/speech") {
			parts++
		}
	}
	first, second := len(r.Calls[0].Files["voice"].Data), len(r.Calls[1].Files["voice"].Data)
	if parts != 3 || first > toolspec.MaxVoiceNoteBytes || first < 2*part || second < part || second > 2*part {
		t.Errorf("%d parts in notes of %d and %d bytes: want the first two parts in one note within %d bytes, the third in the next",
			parts, first, second, toolspec.MaxVoiceNoteBytes)
	}
	files := organised(t, filepath.Join(s.DataDir, "audio-output", "bot-speaker", "user-942"))
	if len(files) != 2 {
		t.Errorf("organised %v, want the two notes", files)
	}
	if r.Summary.Str("outcome") != "ok" {
		t.Errorf("summary = %s", r.Summary.Raw)
	}
}

// A voice answer whose message is edited while the model writes it: the
// speech of the old version stops, no note of it is sent or kept, what
// OpenAI spoke of it is billed, and the edited version gets its note.
func TestEndToEndVoiceEditedWhileSpoken(t *testing.T) {
	s, ctx := pacedStack(t, nil)
	token := stack.Token("speaker")
	const user = 943
	s.SendMessage("speaker", user, map[string]any{"message_id": 6001, "text": "read me a stroy #long"})
	waitDraft(ctx, t, s, token, user, 0)
	waitLogFrom(t, s, 0, func(l stack.Line) bool { return l.Msg == "speech part made" })
	s.Model.SetPace(0)
	s.Telegram.SendEdit(token, map[string]any{"message_id": 6001, "date": time.Now().Unix() - 1,
		"chat": map[string]any{"id": user, "type": "private", "first_name": "Ann"},
		"from": map[string]any{"id": user, "is_bot": false, "first_name": "Ann"}, "text": "read me a story, short"})
	waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("user") == user && l.Str("outcome") == "ok"
	})
	old := waitLogFrom(t, s, 0, func(l stack.Line) bool {
		return l.Msg == "request" && l.Int("user") == user && l.Str("outcome") == "edited"
	})
	if old.Float("openai_usd") <= 0 {
		t.Errorf("the old version's line has openai_usd %g: want the speech made before the edit", old.Float("openai_usd"))
	}
	calls := s.ChatCalls("speaker", user)
	if len(calls) != 1 || calls[0].Method != "sendVoice" {
		t.Fatalf("sent %d messages, want the edited version's voice note only", len(calls))
	}
	if files := organised(t, filepath.Join(s.DataDir, "audio-output", "bot-speaker", "user-943")); len(files) != 1 {
		t.Errorf("organised %v, want the edited version's note only", files)
	}
	var spokenNew bool
	for _, r := range s.OpenAI.Requests() {
		spokenNew = spokenNew || strings.Contains(r.Input, "read me a story, short")
	}
	if !spokenNew {
		t.Error("the edited version was not spoken")
	}
}
