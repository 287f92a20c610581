package bot

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"brainbot/message"
)

// After a restart the conversations used within PrewarmWithin, the most
// recent first and at most PrewarmMax, get their process started ahead of
// their next message, with the request it will have (resuming their
// session), until the agent has no room; a conversation of a bot without a
// brain is left alone.
func TestPrewarmAfterRestart(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "claude:\n  max_turns: 5\n")}, func(c *Config) {
		c.PrewarmWithin, c.PrewarmMax, c.Spares = time.Hour, 4, 1
	})
	h.waitLog("recent conversations prewarmed") // none yet
	now := time.Now()
	for i, ago := range []time.Duration{2 * time.Hour, 5 * time.Minute, time.Minute, 3 * time.Minute, 4 * time.Minute, 2 * time.Minute} {
		bot := "alpha"
		if i == 5 {
			bot = "gone" // its brain was removed
		}
		if err := h.store.UseSession(context.Background(), message.Key{Bot: bot, Chat: int64(i + 1)}, fmt.Sprint("s", i+1), now.Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	h.claude.mu.Lock()
	h.claude.prewarmRoom = 2
	h.claude.mu.Unlock()
	h.stop()
	h.start()
	if line := h.waitLog("recent conversations prewarmed"); line.ContextMap()["prewarmed"] != int64(2) || line.ContextMap()["recent"] != int64(4) {
		t.Errorf("prewarm line %v, want 2 of the 4 most recent", line.ContextMap())
	}
	h.claude.mu.Lock()
	prewarmed := slices.Clone(h.claude.prewarmed)
	h.claude.mu.Unlock()
	var got []string
	for _, req := range prewarmed {
		got = append(got, fmt.Sprintf("%s %s %v", req.Conversation, req.SessionID, req.Resume))
		if processShape(req) != processShape(h.claude.keptSets()["alpha"].shape) {
			t.Errorf("prewarmed with shape %s, want the bot's requests' %s", processShape(req), processShape(h.claude.keptSets()["alpha"].shape))
		}
	}
	// Chat 6 (2 minutes ago) is of a bot without a brain; chat 5 finds no
	// room.
	if want := []string{"alpha/3/0 s3 true", "alpha/4/0 s4 true"}; !slices.Equal(got, want) {
		t.Errorf("prewarmed %v, want %v", got, want)
	}
}
