package bot

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"brainbot/message"
	"brainbot/state"
	"brainbot/state/sqlite"
)

// pausingStore is a store whose session reads fail as unavailable for
// now, the first fails times: NATS away, in a cluster.
type pausingStore struct {
	*sqlite.Store
	fails atomic.Int32
}

func (s *pausingStore) Session(ctx context.Context, c message.Key) (state.Session, bool, error) {
	if s.fails.Add(-1) >= 0 {
		return state.Session{}, false, fmt.Errorf("read session: %w", state.ErrUnavailable)
	}
	return s.Store.Session(ctx, c)
}

// A message whose state is unavailable for now is handed back to its log
// and answered once the state is back: the user gets the answer, no error
// reply, and the log names the pause. (Its attempt was journaled, so it
// comes back as a retry; a second such pause would ask for it again, as
// in a cluster. TestUnsavedSessionHandsTheMessageBack pauses one many
// times before its attempt.)
func TestAnUnavailableStatePausesTheMessage(t *testing.T) {
	var paused *pausingStore
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, func(c *Config) {
		paused = &pausingStore{Store: c.State.(*sqlite.Store)}
		paused.fails.Store(1)
		c.State = paused
	})
	got := h.exchange(tokenA, 1, "hello")
	if text := got.Param("text"); text != "You said: hello" {
		t.Fatalf("reply %q, want the answer", text)
	}
	if n := len(h.logs.FilterMessage("state unavailable for now; the message is handed back and answered once it is back").All()); n != 1 {
		t.Errorf("%d pauses logged, want 1", n)
	}
	if n := len(h.srv.Sent(tokenA, "sendMessage")); n != 1 {
		t.Errorf("%d messages sent, want the one answer", n)
	}
}
