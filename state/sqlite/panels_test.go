package sqlite

import (
	"context"
	"errors"
	"testing"
	"time"

	"brainbot/state"
)

func TestPanelRuns(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	now := time.UnixMilli(1741559400000).UTC()
	first := state.PanelRun{ID: "r1", Chat: -100, MessageID: 7, Run: []byte(`{"turn":1}`), Created: now}
	if err := s.StartPanel(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The same /panel message through another member bot.
	if err := s.StartPanel(ctx, state.PanelRun{ID: "r2", Chat: -100, MessageID: 7, Run: []byte(`{}`), Created: now}); !errors.Is(err, state.ErrPanelStarted) {
		t.Errorf("same message: %v, want state.ErrPanelStarted", err)
	}
	if err := s.StartPanel(ctx, state.PanelRun{ID: "r3", Chat: -100, MessageID: 8, Run: []byte(`{}`), Created: now}); !errors.Is(err, state.ErrPanelBusy) {
		t.Errorf("second panel in the chat: %v, want state.ErrPanelBusy", err)
	}
	if err := s.StartPanel(ctx, state.PanelRun{ID: "r4", Chat: -200, MessageID: 8, Run: []byte(`{}`), Created: now.Add(time.Second)}); err != nil {
		t.Errorf("a panel in another chat: %v", err)
	}
	if err := s.SavePanel(ctx, "r1", []byte(`{"turn":3}`), false, now); err != nil {
		t.Fatal(err)
	}
	if runs, err := s.RunningPanels(ctx); err != nil || len(runs) != 0 {
		t.Fatalf("running = %+v, %v; want none: this process runs them", runs, err)
	}
	// The next process takes them up, once.
	next, err := Open(ctx, s.db.path)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	runs, err := next.RunningPanels(ctx)
	if err != nil || len(runs) != 2 || runs[0].ID != "r1" || string(runs[0].Run) != `{"turn":3}` || runs[0].MessageID != 7 {
		t.Fatalf("running = %+v, %v", runs, err)
	}
	if again, err := next.RunningPanels(ctx); err != nil || len(again) != 0 {
		t.Fatalf("running at a second look = %+v, %v; want none", again, err)
	}
	if err := s.SavePanel(ctx, "r1", []byte(`{"turn":3,"done":true}`), true, now); err != nil {
		t.Fatal(err)
	}
	if err := s.StartPanel(ctx, state.PanelRun{ID: "r5", Chat: -100, MessageID: 9, Run: []byte(`{}`), Created: now}); err != nil {
		t.Errorf("a new panel after the first finished: %v", err)
	}
	if err := s.SavePanel(ctx, "nope", nil, true, now); err == nil {
		t.Error("saved a run that does not exist")
	}
}
