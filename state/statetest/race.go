package statetest

import (
	"errors"
	"sync"
	"testing"

	"brainbot/state"
)

// What two requests at once (two conversations of one process, or two
// instances) must not both get: a message past the daily limit, a tap on
// buttons already used, a second panel in a chat.

// together runs fn n times at once and waits for all of them.
func together(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// addsAtOnce makes eight adds at once within a limit of three (add's
// answer when full is full) and checks that three were kept, as listed
// counts them.
func addsAtOnce(t *testing.T, full error, add func(limit int) error, listed func() int) {
	t.Helper()
	const limit = 3
	errs := make([]error, 8)
	together(len(errs), func(i int) { errs[i] = add(limit) })
	kept := 0
	for _, err := range errs {
		switch {
		case err == nil:
			kept++
		case !errors.Is(err, full):
			t.Error(err)
		}
	}
	if n := listed(); kept != limit || n != limit {
		t.Errorf("%d adds at once kept %d (%d listed), want %d", len(errs), kept, n, limit)
	}
}

var raceTests = []behaviour{
	{"TakesAtOnceNeverPassTheLimit", func(t *testing.T, s *subject) {
		now := base()
		var mu sync.Mutex
		taken := 0
		together(8, func(int) {
			ok, _, err := s.TakeDaily(ctx(t), "alice", 7, 3, now)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		})
		if taken != 3 {
			t.Errorf("8 messages at once under a limit of 3: %d taken, want 3", taken)
		}
		wantCount(t, s, "alice", 7, now, 3)
	}},
	{"TapsAtOnceOneWins", func(t *testing.T, s *subject) {
		q := question(0, "yes", "no")
		must(t, s.SaveButtons(ctx(t), q))
		var mu sync.Mutex
		var won []int64
		together(4, func(i int) {
			update := int64(500 + i)
			ok, err := s.UseButtons(ctx(t), q.ID, update)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won = append(won, update)
				mu.Unlock()
			}
		})
		if len(won) != 1 {
			t.Fatalf("4 taps at once: %v used the buttons, want one", won)
		}
		q.UsedBy = won[0]
		wantButtons(t, s, q)
	}},
	{"PanelsAtOnceOneStarts", func(t *testing.T, s *subject) {
		var mu sync.Mutex
		started, busy := 0, 0
		together(4, func(i int) {
			err := s.StartPanel(ctx(t), panelRun(string(rune('a'+i)), -100, 10+i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				started++
			case errors.Is(err, state.ErrPanelBusy):
				busy++
			default:
				t.Error(err)
			}
		})
		if started != 1 || busy != 3 {
			t.Errorf("4 panels at once in a chat: %d started, %d busy; want 1 and 3", started, busy)
		}
	}},
}
