package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/cmd/internal/stack"
)

// The pace of the stand-ins in BenchmarkVoicePace: a model's (0.5 s to
// its first token, then about 250 characters a second: 64 bytes every
// 256 ms) and OpenAI speech's (0.3 s + 2.5 ms a character);
// BenchmarkSmallServer takes the first token's alone. Settings of the
// test stand-ins, not of the product.
const (
	paceFirstToken   = 500 * time.Millisecond
	pacePer64Bytes   = 256 * time.Millisecond
	paceSpeechBase   = 300 * time.Millisecond
	paceSpeechPerChr = 2500 * time.Microsecond
)

// pacedVoiceStack is a stack whose stand-ins take a real model's and
// OpenAI's time; env is added to brainbot's.
func pacedVoiceStack(b *testing.B, env ...string) *stack.Stack {
	s := newStackWith(b, env)
	paceLikeReal(s)
	return s
}

// paceLikeReal makes s's stand-ins take a real model's and OpenAI's time.
func paceLikeReal(s *stack.Stack) {
	s.Model.SetDelay(paceFirstToken)
	s.Model.SetPace(pacePer64Bytes)
	s.OpenAI.SetPace(paceSpeechBase, paceSpeechPerChr)
}

// sentences is a message of n sentences of about 100 characters: the
// scripted model answers it back, "You said: ...".
func sentences(n int) string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("Sentence %d of the answer says something worth hearing, and then it says a little more.", i))
	}
	return strings.Join(out, " ")
}

// arrival sends text to bot as user and returns how long the answer took
// to reach Telegram (its first call of method).
func arrival(b *testing.B, s *stack.Stack, bot string, user int64, text, method string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	start := time.Now()
	r, err := s.Send(bot, user, text).Wait(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range r.Calls {
		if c.Method == method {
			return c.Time.Sub(start)
		}
	}
	b.Fatalf("%s to %q: no %s in %v (%s)", bot, text, method, r.Methods(), r.Summary.Raw)
	return 0
}

// BenchmarkVoicePace: the same answer as text and as a voice note, with
// the stand-ins at a model's and OpenAI's pace, warm conversations; a
// short answer (8 sentences, ~800 characters) and a long one (30, ~3,000).
// Voice is measured as brainbot does it (spoken while the model writes,
// sent when the tool reports the file) and the old way
// (BRAINBOT_SPEECH_EARLY=off: spoken in turn two's call, sent after the
// model's closing words), in one run. Target: voice − text ≤ 1.2 s.
func BenchmarkVoicePace(b *testing.B) {
	now := pacedVoiceStack(b)
	old := pacedVoiceStack(b, "BRAINBOT_SPEECH_EARLY=off")
	lengths := []struct {
		name  string
		text  string
		users int64
	}{{"short", sentences(8), 951}, {"long", sentences(30), 961}}
	for _, l := range lengths {
		// The conversations' first messages start their CLIs.
		arrival(b, now, "narrator", l.users, "hello", "sendMessage")
		arrival(b, now, "speaker", l.users+1, "hello", "sendVoice")
		arrival(b, old, "speaker", l.users+2, "hello", "sendVoice")
	}
	samples := medians{}
	for i := 0; i < b.N; i++ {
		for _, l := range lengths {
			text := arrival(b, now, "narrator", l.users, l.text, "sendMessage")
			voice := arrival(b, now, "speaker", l.users+1, l.text, "sendVoice")
			before := arrival(b, old, "speaker", l.users+2, l.text, "sendVoice")
			samples.add(l.name+"-text", text)
			samples.add(l.name+"-voice", voice)
			samples.add(l.name+"-old-voice", before)
			samples.add(l.name+"-voice-minus-text", voice-text)
			samples.add(l.name+"-old-minus-text", before-text)
		}
	}
	for _, l := range lengths {
		gap, oldGap := slices.Sorted(slices.Values(samples[l.name+"-voice-minus-text"])), slices.Sorted(slices.Values(samples[l.name+"-old-minus-text"]))
		b.ReportMetric(oldGap[len(oldGap)/2]/gap[len(gap)/2], l.name+"-old/new")
	}
	samples.report(b)
}
