package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/cmd/internal/stack"
)

// panelVoicePace slows the stand-ins to a real model's and OpenAI's pace
// (about 640 characters a second; 0.3 s + 2.5 ms a character of speech)
// for the rest of the test.
func panelVoicePace(t *testing.T, s *stack.Stack) {
	s.Model.SetPace(100 * time.Millisecond)
	s.OpenAI.SetPace(300*time.Millisecond, 2500*time.Microsecond)
	t.Cleanup(func() {
		s.Model.SetPace(0)
		s.OpenAI.SetPace(0, 0)
	})
}

// panelAnswerSpoken runs a speaking panel in group with a question long
// enough that chat's answer passes its 600 characters, and returns
// chat's answer as the group got it, what OpenAI was asked to speak for
// it, when the first of that reached OpenAI, when the model wrote the
// answer's last word, and when its voice note went out.
func panelAnswerSpoken(t *testing.T, s *stack.Stack, group int64) (kept string, spoken []string, firstSpeech, lastWord, sent time.Time) {
	t.Helper()
	members := []string{"chat", "voice", "painter"}
	var q []string
	for i := 1; i <= 6; i++ {
		q = append(q, "Should the city close its streets to cars on day number "+string(rune('0'+i))+" of the week?")
	}
	start := time.Now()
	mark := s.Logs().Len()
	s.SendGroupCommand(group, 21, "/panel "+strings.Join(q, " "), members...)
	summary := waitPanelLine(t, s, mark, group)
	if summary.Str("outcome") != "ok" {
		t.Fatalf("summary %s", summary.Raw)
	}
	m := readManifest(t, summary.Str("manifest"))
	var comment string
	for _, it := range m.Items {
		switch {
		case it.Member == "chat" && it.Turn == 1:
			kept = it.Text
		case it.Member == "chat" && it.Turn == 2:
			comment = it.Text
		}
	}
	// chat's answers in turns 1 and 3, as the model streamed them.
	var answers []int
	last := map[int]time.Time{}
	text := map[int]string{}
	for _, d := range s.Model.TextDeltas() {
		if d.At.Before(start) {
			continue
		}
		text[d.Answer] += d.Text
		last[d.Answer] = d.At
		if len(text[d.Answer]) == len(d.Text) {
			answers = append(answers, d.Answer)
		}
	}
	answers = slices.DeleteFunc(answers, func(n int) bool { return !strings.HasPrefix(text[n], "You said: You are Chat,") })
	if len(answers) != 2 {
		t.Fatalf("chat streamed %d answers, want turns 1 and 3", len(answers))
	}
	lastWord = last[answers[0]]
	turn3 := time.Now()
	for _, d := range s.Model.TextDeltas() {
		if d.Answer == answers[1] && d.At.Before(turn3) {
			turn3 = d.At
		}
	}
	for _, r := range s.OpenAI.Requests() {
		if r.Voice == "nova" && !r.At.Before(start) && r.At.Before(turn3) && r.Input != comment {
			spoken = append(spoken, r.Input)
			if firstSpeech.IsZero() {
				firstSpeech = r.At
			}
		}
	}
	sent = s.GroupPosts(group, members...)[0].Call.Time
	return kept, spoken, firstSpeech, lastWord, sent
}

// inOrder joins the pieces of text in the order they come in it, and
// returns that and text with their spaces made single.
func inOrder(text string, pieces []string) (joined, whole string) {
	pieces = slices.Clone(pieces)
	slices.SortFunc(pieces, func(a, b string) int { return strings.Index(text, a) - strings.Index(text, b) })
	return strings.Join(strings.Fields(strings.Join(pieces, " ")), " "), strings.Join(strings.Fields(text), " ")
}

// A speaking panel's member is spoken while its answer streams, as a
// voice answer is (issue 37): OpenAI gets its first part before the
// model's last word, and the note holds the answer as the group reads it,
// cut at its 600 characters, and nothing past the cut.
func TestEndToEndPanelVoiceWhileWriting(t *testing.T) {
	s := newPanelStack(t)
	panelVoicePace(t, s)
	kept, spoken, firstSpeech, lastWord, sent := panelAnswerSpoken(t, s, -100711)
	if !strings.HasSuffix(kept, "…") {
		t.Fatalf("chat's answer %q was not cut at its length", kept)
	}
	if joined, whole := inOrder(kept, spoken); joined != whole {
		t.Errorf("chat's answer spoken in %d parts as\n%q\nwant what the group reads:\n%q", len(spoken), joined, whole)
	}
	if !firstSpeech.Before(lastWord) {
		t.Errorf("first speech request at %v, the model's last word at %v: want speech to start while the model writes",
			firstSpeech.Format(time.StampMicro), lastWord.Format(time.StampMicro))
	}
	t.Logf("speech began %v before the model's last word; the note went out %v after it",
		lastWord.Sub(firstSpeech).Round(time.Millisecond), sent.Sub(lastWord).Round(time.Millisecond))
}

// BRAINBOT_SPEECH_EARLY=off speaks a member once its turn is written, as
// before: to compare.
func TestEndToEndPanelVoiceAfterWriting(t *testing.T) {
	s := newPanelStack(t, "BRAINBOT_SPEECH_EARLY=off")
	panelVoicePace(t, s)
	kept, spoken, firstSpeech, lastWord, sent := panelAnswerSpoken(t, s, -100712)
	if joined, whole := inOrder(kept, spoken); joined != whole {
		t.Errorf("chat's answer spoken as\n%q\nwant\n%q", joined, whole)
	}
	if firstSpeech.Before(lastWord) {
		t.Errorf("speech began before the model's last word with BRAINBOT_SPEECH_EARLY=off")
	}
	t.Logf("the note went out %v after the model's last word", sent.Sub(lastWord).Round(time.Millisecond))
}
