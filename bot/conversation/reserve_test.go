package conversation

import (
	"cmp"
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/message"
)

// heldAgent makes k's agent hold each run until the test lets it go
// through its channel in runs (one a run), answering at cost usd.
func heldAgent(k *kit, usd float64) (runs chan chan struct{}) {
	runs = make(chan chan struct{}, 8)
	k.agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		release := make(chan struct{})
		runs <- release
		<-release
		return &claude.Result{Text: "Hello, Ann.", Answered: true, SessionID: cmp.Or(req.SessionID, "session-1"), CostUSD: usd}, nil
	}
	return runs
}

// serveApart serves each message in a chat of its own, at once, as the
// queues of several chats do; wait waits for them all.
func (k *kit) serveApart(ins ...*message.Inbound) (wait func()) {
	var done []<-chan struct{}
	for i, in := range ins {
		in.Key.Chat += int64(1000 * (i + 1))
		done = append(done, k.serveAsync(in))
	}
	return func() {
		for _, d := range done {
			<-d
		}
	}
}

// waiting is how many messages wait for room under a cap.
func (k *kit) waiting() int {
	return k.logs.FilterMessage("spending cap: waiting for the answers under way to end").Len()
}

// An answer under way counts against the user's cap before its cost is
// known: until the bot's first answer has a price, the next waits for
// it; after, each holds what the dearest answer cost, and one with no
// room beside those under way waits and gets the cap's reply once they
// spent the rest.
func TestAnswersUnderWayCountAgainstTheCap(t *testing.T) {
	k := newKit(t, "limits:\n  per_user_daily_usd: 0.05\n")
	runs := heldAgent(k, 0.02)

	wait := k.serveApart(k.private("first"), k.private("second"))
	first := <-runs
	waitFor(t, func() bool { return k.waiting() == 1 }) // no price known yet: it waits
	if got := testutil.ToFloat64(k.p.cfg.Metrics.Reserved.WithLabelValues(kitBot)); got != 0.05 {
		t.Errorf("reserved while the first answer runs alone: $%g, want all of the cap", got)
	}
	close(first)
	close(<-runs) // the second, once the first's $0.02 is spent: $0.03 left
	wait()

	// $0.04 spent, $0.01 left: the third holds $0.02 (the dearest answer
	// so far), so the fourth finds no room and waits.
	wait = k.serveApart(k.private("third"), k.private("fourth"))
	third := <-runs
	waitFor(t, func() bool { return k.waiting() == 2 })
	close(third)
	wait()
	select {
	case <-runs:
		t.Fatal("the fourth answer ran past the cap")
	default:
	}
	var answered, capped int
	for _, l := range k.logs.FilterMessage("request").All() {
		switch l.ContextMap()["outcome"] {
		case "ok":
			answered++
		case outcomeSpendingCap:
			capped++
		}
	}
	if answered != 3 || capped != 1 {
		t.Errorf("%d answered, %d told the cap is reached; want 3 and 1", answered, capped)
	}
	if got := testutil.ToFloat64(k.p.cfg.Metrics.Reserved.WithLabelValues(kitBot)); got > 1e-9 {
		t.Errorf("reserved after every answer ended: $%g, want 0", got)
	}
}

// The bot's own cap counts every user's answers under way: a second
// user's message waits for the first user's answer.
func TestAnswersUnderWayCountAgainstTheBotsCap(t *testing.T) {
	k := newKit(t, "limits:\n  daily_usd: 0.03\n")
	runs := heldAgent(k, 0.02)
	wait := k.serveApart(k.inGroup(kitUser, "Ann", "hello"), k.inGroup(8, "Bo", "hello"))
	first := <-runs
	waitFor(t, func() bool { return k.waiting() == 1 })
	close(first)
	close(<-runs) // $0.01 left
	wait()
}

// A voice answer speaks no more than tts.max_chars, nor than the room
// under the cap buys; with room for less than a few seconds of speech it
// is written instead.
func TestSpeechIsBoundedByTheRoomUnderTheCap(t *testing.T) {
	for _, tt := range []struct {
		name, extra string
		spent       float64
		mode        claude.Mode
		chars       int
	}{
		{"no cap", "", 0, claude.Speech, brain.DefaultMaxSpokenChars},
		{"the brain's bound", "tts:\n  enabled: true\n  max_chars: 900\n", 0, claude.Speech, 900},
		{"no bound", "tts:\n  enabled: true\n  max_chars: 0\n", 0, claude.Speech, 0},
		{"a cent left", "limits:\n  per_user_daily_usd: 0.05\n", 0.04, claude.Speech, 666}, // tts-1: $15 a million characters
		{"a tenth of a cent left", "limits:\n  daily_usd: 0.05\n", 0.049, claude.Text, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			extra := tt.extra
			if !strings.Contains(extra, "tts:") {
				extra += "tts:\n  enabled: true\n"
			}
			k := newKit(t, extra)
			if tt.spent > 0 {
				k.spend(t, kitUser, tt.spent)
			}
			k.serve(k.private("tell me a long story"))
			reqs := k.agent.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			if reqs[0].Mode != tt.mode || tt.mode == claude.Speech && reqs[0].Speech.MaxChars != tt.chars {
				t.Errorf("asked for %s speaking at most %d characters, want %s and %d", reqs[0].Mode, reqs[0].Speech.MaxChars, tt.mode, tt.chars)
			}
		})
	}
}
