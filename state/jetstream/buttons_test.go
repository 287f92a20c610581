package jetstream

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
	"brainbot/state/jetstream/natstest"
)

// Buttons one instance saved resolve on another; of two instances'
// taps at once exactly one uses them (a replay of the winner's update
// too); a typed message closes the open question, a new question the one
// before.
func TestButtonsResolveOnEveryInstance(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a").State(), join(t, url, "b").State()
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 5, 0, 0, 0, time.UTC)
	conv := message.Key{Bot: "bot", Chat: -100123, Thread: 7}
	q := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsQuestion, Conversation: conv, MessageID: 41, User: 7,
		Options: []string{"Paris", "Rome"}, Text: "Which city?", Created: at}
	if err := a.SaveButtons(ctx, q); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.LookupButtons(ctx, q.ID); err != nil || !ok || !reflect.DeepEqual(got, q) {
		t.Fatalf("b looked up %+v, %v, %v; want %+v", got, ok, err, q)
	}
	if _, ok, err := b.LookupButtons(ctx, "forged.id"); ok || err != nil {
		t.Errorf("forged id found: %v, %v", ok, err)
	}
	var wg sync.WaitGroup
	won := make([]bool, 2)
	for i, s := range []*State{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			used, err := s.UseButtons(ctx, q.ID, int64(900+i))
			if err != nil {
				t.Error(err)
			}
			won[i] = used
		}()
	}
	wg.Wait()
	if won[0] == won[1] {
		t.Fatalf("taps at once on two instances used the buttons: %v", won)
	}
	winner := int64(900)
	if won[1] {
		winner = 901
	}
	if used, err := a.UseButtons(ctx, q.ID, winner); !used || err != nil {
		t.Errorf("the winning update replayed: %v, %v", used, err)
	}

	second := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsQuestion, Conversation: conv, MessageID: 42, User: 7, Options: []string{"a", "b"}, Created: at}
	third := second
	third.ID, third.MessageID = state.NewButtonsID(), 43
	for _, q := range []state.Buttons{second, third} {
		if err := a.SaveButtons(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if used, err := b.UseButtons(ctx, second.ID, 902); used || err != nil {
		t.Errorf("a question replaced by another was used: %v, %v", used, err)
	}
	if closed, err := b.CloseQuestions(ctx, conv, 8); len(closed) != 0 || err != nil {
		t.Errorf("someone else's message closed the question: %+v, %v", closed, err)
	}
	closed, err := b.CloseQuestions(ctx, conv, 7)
	if err != nil || len(closed) != 1 || closed[0].ID != third.ID || closed[0].MessageID != 43 {
		t.Errorf("closed %+v, %v; want the third question", closed, err)
	}
	if used, err := a.UseButtons(ctx, third.ID, 903); used || err != nil {
		t.Errorf("a question answered in words was used: %v, %v", used, err)
	}
	if closed, err := a.CloseQuestions(ctx, conv, 0); len(closed) != 0 || err != nil {
		t.Errorf("closed again: %+v, %v", closed, err)
	}
	if err := b.KeepButtonsFile(ctx, q.ID, "/data/a.mp3"); err != nil {
		t.Fatal(err)
	}
	if err := a.PlaceButtons(ctx, q.ID, 44); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := a.LookupButtons(ctx, q.ID); got.File != "/data/a.mp3" || got.UsedBy != winner || got.MessageID != 44 {
		t.Errorf("after keeping a file: %+v", got)
	}
}
