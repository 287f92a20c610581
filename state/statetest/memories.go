package statetest

import (
	"errors"
	"slices"
	"testing"

	"brainbot/state"
)

// The notes personas keep about users (Memories).

var memoryTests = []behaviour{
	{"KeptPerBotAndUserInOrder", func(t *testing.T, s *subject) {
		now := base()
		first := addNote(t, s, "alice", 7, "Ann has a cat named Miso", 0)
		second := addNote(t, s, "alice", 7, "Ann is learning Portuguese", 0)
		addNote(t, s, "bob", 7, "Ann likes jazz", 0)
		addNote(t, s, "alice", 8, "Bo works nights", 0)
		if first.ID == second.ID || first.Text != "Ann has a cat named Miso" || first.Created.Before(now) {
			t.Errorf("AddNote = %+v then %+v, want two ids and the text as given", first, second)
		}
		s.restarted()
		wantNotes(t, s, "alice", 7, "Ann has a cat named Miso", "Ann is learning Portuguese")
		wantNotes(t, s, "bob", 7, "Ann likes jazz")
		wantNotes(t, s, "alice", 8, "Bo works nights")
		wantNotes(t, s, "carol", 7)
	}},
	{"BoundedByTheLimit", func(t *testing.T, s *subject) {
		addNote(t, s, "alice", 7, "one", 2)
		addNote(t, s, "alice", 7, "two", 2)
		if _, err := s.AddNote(ctx(t), "alice", 7, "three", 2, base()); !errors.Is(err, state.ErrNotesFull) {
			t.Errorf("a third note of at most 2: %v, want ErrNotesFull", err)
		}
		addNote(t, s, "alice", 8, "another user's", 2)
		addNote(t, s, "alice", 7, "unbounded", 0)
		wantNotes(t, s, "alice", 7, "one", "two", "unbounded")
	}},
	{"DroppedOneOrAll", func(t *testing.T, s *subject) {
		one := addNote(t, s, "alice", 7, "one", 0)
		two := addNote(t, s, "alice", 7, "two", 0)
		addNote(t, s, "alice", 8, "Bo's", 0)
		// Ids name notes among their user's: Bo has no second note.
		if dropped, err := s.DropNote(ctx(t), "alice", 8, two.ID); err != nil || dropped {
			t.Errorf("Bo dropping Ann's note = %v, %v, want false: a note is its user's", dropped, err)
		}
		if dropped, err := s.DropNote(ctx(t), "alice", 7, one.ID); err != nil || !dropped {
			t.Errorf("DropNote = %v, %v", dropped, err)
		}
		for _, id := range []string{one.ID, "no such id", ""} {
			if dropped, err := s.DropNote(ctx(t), "alice", 7, id); err != nil || dropped {
				t.Errorf("DropNote(%q) again = %v, %v, want false", id, dropped, err)
			}
		}
		wantNotes(t, s, "alice", 7, "two")
		// A new note never takes the id of one dropped.
		three := addNote(t, s, "alice", 7, "three", 0)
		if three.ID == one.ID || three.ID == two.ID {
			t.Errorf("new note's id %q was another's", three.ID)
		}
		if n, err := s.DropNotes(ctx(t), "alice", 7); err != nil || n != 2 {
			t.Errorf("DropNotes = %d, %v, want 2", n, err)
		}
		wantNotes(t, s, "alice", 7)
		wantNotes(t, s, "alice", 8, "Bo's")
		if n, err := s.DropNotes(ctx(t), "alice", 7); err != nil || n != 0 {
			t.Errorf("DropNotes of none = %d, %v", n, err)
		}
		if four := addNote(t, s, "alice", 7, "four", 0); slices.Contains([]string{one.ID, two.ID, three.ID}, four.ID) {
			t.Errorf("note after DropNotes took id %q of one dropped", four.ID)
		}
	}},
	{"ForgottenWithTheUser", func(t *testing.T, s *subject) {
		addNote(t, s, "alice", 7, "Ann's with alice", 0)
		addNote(t, s, "alice", 7, "Ann's too", 0)
		addNote(t, s, "bob", 7, "Ann's with bob", 0)
		addNote(t, s, "alice", 8, "Bo's", 0)
		forgot, err := s.ForgetUser(ctx(t), "alice", 7)
		must(t, err)
		if forgot.Notes != 2 {
			t.Errorf("Forgotten.Notes = %d, want 2", forgot.Notes)
		}
		wantNotes(t, s, "alice", 7)
		wantNotes(t, s, "bob", 7, "Ann's with bob")
		wantNotes(t, s, "alice", 8, "Bo's")
		forgot, err = s.ForgetUser(ctx(t), "", 7)
		must(t, err)
		if forgot.Notes != 1 {
			t.Errorf("Forgotten.Notes of every bot = %d, want 1", forgot.Notes)
		}
		wantNotes(t, s, "bob", 7)
	}},
	{"AtOnceNeverPastTheLimit", func(t *testing.T, s *subject) {
		addsAtOnce(t, state.ErrNotesFull, func(limit int) error {
			_, err := s.AddNote(ctx(t), "alice", 7, "note", limit, base())
			return err
		}, func() int {
			notes, err := s.Notes(ctx(t), "alice", 7)
			must(t, err)
			return len(notes)
		})
	}},
}

func addNote(t *testing.T, s *subject, bot string, user int64, text string, limit int) state.Note {
	t.Helper()
	n, err := s.AddNote(ctx(t), bot, user, text, limit, base())
	must(t, err)
	return n
}

// wantNotes checks the texts of user's notes with bot, in order.
func wantNotes(t *testing.T, s *subject, bot string, user int64, want ...string) {
	t.Helper()
	WantNotes(t, s, bot, user, want...)
}

// WantNotes checks the texts of the notes m keeps about user with bot,
// in order: for the tests of the notes' consumers too.
func WantNotes(t *testing.T, m state.Memories, bot string, user int64, want ...string) {
	t.Helper()
	notes, err := m.Notes(ctx(t), bot, user)
	must(t, err)
	var got []string
	for _, n := range notes {
		got = append(got, n.Text)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Notes(%s, %d) = %q, want %q", bot, user, got, want)
	}
}
