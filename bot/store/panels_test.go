package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPanelRuns(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	now := time.UnixMilli(1741559400000).UTC()
	first := PanelRun{ID: "r1", Chat: -100, MessageID: 7, Run: []byte(`{"turn":1}`), Created: now}
	if err := s.StartPanel(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The same /panel message through another member bot.
	if err := s.StartPanel(ctx, PanelRun{ID: "r2", Chat: -100, MessageID: 7, Run: []byte(`{}`), Created: now}); !errors.Is(err, ErrPanelStarted) {
		t.Errorf("same message: %v, want ErrPanelStarted", err)
	}
	if err := s.StartPanel(ctx, PanelRun{ID: "r3", Chat: -100, MessageID: 8, Run: []byte(`{}`), Created: now}); !errors.Is(err, ErrPanelBusy) {
		t.Errorf("second panel in the chat: %v, want ErrPanelBusy", err)
	}
	if err := s.StartPanel(ctx, PanelRun{ID: "r4", Chat: -200, MessageID: 8, Run: []byte(`{}`), Created: now.Add(time.Second)}); err != nil {
		t.Errorf("a panel in another chat: %v", err)
	}
	if err := s.SavePanel(ctx, "r1", []byte(`{"turn":3}`), false, now); err != nil {
		t.Fatal(err)
	}
	runs, err := s.RunningPanels(ctx)
	if err != nil || len(runs) != 2 || runs[0].ID != "r1" || string(runs[0].Run) != `{"turn":3}` || runs[0].MessageID != 7 {
		t.Fatalf("running = %+v, %v", runs, err)
	}
	if err := s.SavePanel(ctx, "r1", []byte(`{"turn":3,"done":true}`), true, now); err != nil {
		t.Fatal(err)
	}
	if err := s.StartPanel(ctx, PanelRun{ID: "r5", Chat: -100, MessageID: 9, Run: []byte(`{}`), Created: now}); err != nil {
		t.Errorf("a new panel after the first finished: %v", err)
	}
	if err := s.SavePanel(ctx, "nope", nil, true, now); err == nil {
		t.Error("saved a run that does not exist")
	}
}
