package sqlite

import (
	"context"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
)

func TestPruneByAge(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	const oneDay = 24 * time.Hour
	now := t0.Add(2 * time.Hour) // 2025-03-10 00:30 UTC
	// One message on each of 2025-03-08, 03-09 and 03-10.
	for _, at := range []time.Time{t0.Add(-oneDay), t0, now} {
		if _, _, err := s.TakeDaily(ctx, "b", 1, 0, at); err != nil {
			t.Fatal(err)
		}
	}
	// "old" ends 100 days ago, "recent" 10 days ago; "current" goes on.
	for _, use := range []struct {
		id string
		at time.Time
	}{{"old", now.Add(-101 * oneDay)}, {"recent", now.Add(-100 * oneDay)}, {"current", now.Add(-10 * oneDay)}} {
		if err := s.UseSession(ctx, message.Key{Bot: "b", Chat: 1}, use.id, use.at); err != nil {
			t.Fatal(err)
		}
	}

	if p, err := s.Prune(ctx, now, state.Retention{}); err != nil || p != (state.Pruned{}) {
		t.Fatalf("Prune with zero state.Retention = %+v, %v; want nothing deleted", p, err)
	}
	p, err := s.Prune(ctx, now, state.DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	if p != (state.Pruned{Daily: 1, History: 1}) {
		t.Errorf("pruned %+v, want one counter and one ended session", p)
	}
	for at, want := range map[time.Time]int{t0.Add(-oneDay): 0, t0: 1, now: 1} {
		if n, _ := s.DailyCount(ctx, "b", 1, at); n != want {
			t.Errorf("counter of %s = %d, want %d", day(at), n, want)
		}
	}
	hist, err := s.SessionHistory(ctx, message.Key{Bot: "b", Chat: 1})
	if err != nil || len(hist) != 1 || hist[0].ID != "recent" {
		t.Errorf("history after prune = %+v, %v; want only recent", hist, err)
	}
	if cur, ok, _ := s.Session(ctx, message.Key{Bot: "b", Chat: 1}); !ok || cur.ID != "current" {
		t.Errorf("current session = %+v, %v; pruning must keep it", cur, ok)
	}
}
