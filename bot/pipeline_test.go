package bot

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"
)

// Every message leaves exactly one summary line, whatever its outcome: the
// shape of the pipeline (one begin, one deferred finish) keeps the rule,
// and this test holds it to it for each outcome a request can have in one
// process (interrupted and resend-asked need restarts: see
// TestShutdownGraceThenReplay and TestJournalReplayAfterCrash, which check
// the same rule).
func TestEveryOutcomeWritesOneSummaryLine(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA,
		"access:\n  allowed_users: [1, 2, 3, 4, 5, 6, 7, 8]\nlimits:\n  per_user_per_day: 2\nimage:\n  enabled: true\ntts:\n  enabled: true\n  user_toggle: true\n")},
		func(c *Config) { c.QueueSize = 1 })
	sticker := map[string]any{"sticker": map[string]any{"file_id": "s", "file_unique_id": "s", "type": "regular", "width": 1, "height": 1}}

	h.exchange(tokenA, 1, "/voice")                // command: voice off for user 1
	h.exchange(tokenA, 1, "hi")                    // ok, text
	h.exchange(tokenA, 1, "again")                 // ok, text
	h.exchange(tokenA, 2, "draw a cat")            // ok, image
	h.exchange(tokenA, 3, "speak")                 // ok, speech
	h.exchange(tokenA, 99, "let me in")            // denied
	h.exchange(tokenA, 4, "please #fail")          // error (speech with nothing to say)
	h.exchange(tokenA, 1, "third today")           // limited (user 1 had two)
	h.srv.SendText(tokenA, 5, 5, "/help@otherbot") // ignored: no reply; the /help after it shows it was read
	h.exchange(tokenA, 5, "/help")
	before := len(h.srv.Sent(tokenA))
	h.srv.SendMessage(tokenA, map[string]any{"chat": map[string]any{"id": 6, "type": "private"},
		"from": map[string]any{"id": 6, "first_name": "U"}, "date": 1, "sticker": sticker["sticker"]})
	h.waitSent(tokenA, before+1) // unsupported
	h.srv.SendMessage(tokenA, map[string]any{"chat": map[string]any{"id": 6, "type": "private"},
		"from": map[string]any{"id": 6, "first_name": "U"}, "date": 1,
		"voice": map[string]any{"file_id": "v", "file_unique_id": "v", "duration": 1}})
	h.waitSent(tokenA, before+2) // text only: no transcriber
	h.srv.SendMessage(tokenA, map[string]any{"chat": map[string]any{"id": 6, "type": "private"},
		"from": map[string]any{"id": 6, "first_name": "U"}, "date": 1,
		"document": map[string]any{"file_id": "d", "file_unique_id": "d", "file_name": "a.txt", "file_size": 1 << 30}})
	h.waitSent(tokenA, before+3) // too big
	h.srv.Block(tokenA, 7)
	h.srv.SendText(tokenA, 7, 7, "bye") // blocked
	h.waitLog("user blocked the bot: reply dropped")
	h.srv.SendText(tokenA, 8, 8, "#wait")  // running
	h.srv.SendText(tokenA, 8, 8, "queued") // waiting: the queue (size 1) is full
	h.srv.SendText(tokenA, 8, 8, "more")   // busy
	h.waitLog("conversation queue full: message dropped, sender told to wait")
	close(h.claude.release)

	want := []string{"command", "ok", "denied", "error", "limited", "ignored", "unsupported", "text only", "too big", "blocked", "busy"}
	lines := waitSummaries(t, h.logs, 17)
	perRequest := map[any]int{}
	var outcomes []string
	for _, l := range lines {
		fields := l.ContextMap()
		perRequest[fields["request_id"]]++
		outcomes = append(outcomes, fmt.Sprint(fields["outcome"]))
	}
	for id, n := range perRequest {
		if n != 1 {
			t.Errorf("request %v has %d summary lines, want 1", id, n)
		}
	}
	for _, o := range want {
		if !slices.Contains(outcomes, o) {
			t.Errorf("no request with outcome %q; outcomes: %q", o, outcomes)
		}
	}
	if len(perRequest) != 17 {
		t.Errorf("%d requests summarised, want 17 (one per message): %q", len(perRequest), outcomes)
	}
}

// waitSummaries waits until n summary lines are logged, then a moment
// more, so a second line for any request would be seen too.
func waitSummaries(t testing.TB, logs *observer.ObservedLogs, n int) []observer.LoggedEntry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for logs.FilterMessage("request").Len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d summary lines, want %d", logs.FilterMessage("request").Len(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return logs.FilterMessage("request").All()
}
