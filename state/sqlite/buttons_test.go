package sqlite

import (
	"context"
	"reflect"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
)

// Buttons saved are found by their id after a reopen; one tap uses them
// (the same update again too, for a replay), a second tap does not; a
// typed message closes the conversation's open question, and a new
// question closes the one before; old buttons are pruned.
func TestButtons(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/" + FileName
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1741559400000).UTC()
	conv := message.Key{Bot: "alpha", Chat: -100, Thread: 5}
	q := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsQuestion, Conversation: conv, MessageID: 41, User: 7,
		Options: []string{"Paris", "Rome"}, Text: "Which city?", Created: at}
	if len(q.ID) != 16 {
		t.Errorf("id %q is %d characters, want 16", q.ID, len(q.ID))
	}
	if err := s.SaveButtons(ctx, q); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok, err := s.LookupButtons(ctx, q.ID)
	if err != nil || !ok || !reflect.DeepEqual(got, q) {
		t.Fatalf("looked up %+v, %v, %v; want %+v", got, ok, err, q)
	}
	if _, ok, err := s.LookupButtons(ctx, "forged"); ok || err != nil {
		t.Errorf("unknown id found: %v, %v", ok, err)
	}
	for _, c := range []struct {
		update int64
		want   bool
	}{{900, true}, {900, true}, {901, false}} {
		if used, err := s.UseButtons(ctx, q.ID, c.update); used != c.want || err != nil {
			t.Errorf("tap %d used them: %v, %v; want %v", c.update, used, err, c.want)
		}
	}
	if closed, err := s.CloseQuestions(ctx, conv, 0); len(closed) != 0 || err != nil {
		t.Errorf("closed a used question: %+v, %v", closed, err)
	}

	second := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsQuestion, Conversation: conv, MessageID: 42, User: 7, Options: []string{"a", "b"}, Created: at}
	third := second
	third.ID, third.MessageID = state.NewButtonsID(), 43
	read := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsRead, Conversation: conv, MessageID: 44, Text: "Hello.", Created: at.Add(time.Hour)}
	for _, b := range []state.Buttons{second, third, read} {
		if err := s.SaveButtons(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if used, err := s.UseButtons(ctx, second.ID, 902); used || err != nil {
		t.Errorf("a question replaced by another was used: %v, %v", used, err)
	}
	if closed, err := s.CloseQuestions(ctx, conv, 8); len(closed) != 0 || err != nil {
		t.Errorf("someone else's message closed the question: %+v, %v", closed, err)
	}
	closed, err := s.CloseQuestions(ctx, conv, 7)
	if err != nil || len(closed) != 1 || closed[0].ID != third.ID || closed[0].MessageID != 43 {
		t.Errorf("closed %+v, %v; want the third question", closed, err)
	}
	if used, err := s.UseButtons(ctx, third.ID, 903); used || err != nil {
		t.Errorf("a question answered in words was used: %v, %v", used, err)
	}
	if err := s.KeepButtonsFile(ctx, read.ID, "/data/audio-output/x.mp3"); err != nil {
		t.Fatal(err)
	}
	if err := s.PlaceButtons(ctx, read.ID, 45); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.LookupButtons(ctx, read.ID); got.File != "/data/audio-output/x.mp3" || got.MessageID != 45 {
		t.Errorf("the read-aloud file kept: %+v", got)
	}

	p, err := s.Prune(ctx, at.Add(30*time.Minute+state.MaxButtonsAge), state.Retention{Buttons: state.MaxButtonsAge})
	if err != nil || p.Buttons != 3 {
		t.Errorf("pruned %+v, %v; want 3 buttons", p, err)
	}
	if _, ok, _ := s.LookupButtons(ctx, read.ID); !ok {
		t.Error("buttons younger than the retention pruned")
	}
}
