package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"

	"brainbot/state"
)

// memories keeps, in brainbot_notes, the notes a persona keeps about each
// user, per bot (state.Memories): one value per user and bot holding all
// their notes, changed by revision, so two instances adding at once never
// pass the bound nor lose a note. The value is small: a brain bounds the
// notes in number and size.
type memories struct {
	conn *conn
	kv   jsapi.KeyValue
}

var _ state.Memories = (*memories)(nil)

// notebook is the value of one user's notes with one bot. Next numbers
// the next note: ids are never reused while the value lives.
type notebook struct {
	Next  int64       `json:"next"`
	Notes []noteValue `json:"notes"`
}

type noteValue struct {
	ID      int64     `json:"id"`
	Text    string    `json:"text"`
	Created time.Time `json:"created"`
}

func notesKey(bot string, user int64) string { return fmt.Sprintf("notes.%s.%d", keyPart(bot), user) }

// Notes lists user's notes with bot, the oldest first.
func (m *memories) Notes(ctx context.Context, bot string, user int64) ([]state.Note, error) {
	val, found, err := m.conn.get(ctx, m.kv, notesKey(bot, user))
	if err != nil || !found {
		return nil, wrap("read notes", err)
	}
	var nb notebook
	if err := json.Unmarshal(val, &nb); err != nil {
		return nil, fmt.Errorf("read notes: %w", err)
	}
	notes := make([]state.Note, len(nb.Notes))
	for i, n := range nb.Notes {
		notes[i] = state.Note{ID: strconv.FormatInt(n.ID, 10), Text: n.Text, Created: n.Created}
	}
	return notes, nil
}

// AddNote keeps text as user's newest note with bot, unless limit (> 0)
// are kept already.
func (m *memories) AddNote(ctx context.Context, bot string, user int64, text string, limit int, now time.Time) (state.Note, error) {
	var added noteValue
	full := false
	err := m.conn.change(ctx, m.kv, notesKey(bot, user), func(old []byte, _ bool) ([]byte, bool) {
		var nb notebook
		_ = json.Unmarshal(old, &nb) // none yet: the first note
		if full = limit > 0 && len(nb.Notes) >= limit; full {
			return nil, false
		}
		nb.Next = max(nb.Next, 1)
		added = noteValue{ID: nb.Next, Text: text, Created: now.UTC().Truncate(time.Millisecond)}
		nb.Next++
		nb.Notes = append(nb.Notes, added)
		b, _ := json.Marshal(nb)
		return b, true
	})
	switch {
	case err != nil:
		return state.Note{}, wrap("keep a note", err)
	case full:
		return state.Note{}, fmt.Errorf("keep a note: %w", state.ErrNotesFull)
	}
	return state.Note{ID: strconv.FormatInt(added.ID, 10), Text: added.Text, Created: added.Created}, nil
}

// DropNote deletes user's note id with bot. The value stays, emptied if
// it was the last note, so its ids go on where they were.
func (m *memories) DropNote(ctx context.Context, bot string, user int64, id string) (bool, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return false, nil // no note has such an id
	}
	dropped := false
	err = m.conn.change(ctx, m.kv, notesKey(bot, user), func(old []byte, found bool) ([]byte, bool) {
		var nb notebook
		if !found || json.Unmarshal(old, &nb) != nil {
			dropped = false
			return nil, false
		}
		before := len(nb.Notes)
		nb.Notes = slices.DeleteFunc(nb.Notes, func(v noteValue) bool { return v.ID == n })
		if dropped = len(nb.Notes) < before; !dropped {
			return nil, false
		}
		b, _ := json.Marshal(nb)
		return b, true
	})
	return dropped, wrap("drop a note", err)
}

// DropNotes deletes every note of user's with bot, keeping the count of
// ids given (as DropNote does).
func (m *memories) DropNotes(ctx context.Context, bot string, user int64) (int, error) {
	gone := 0
	err := m.conn.change(ctx, m.kv, notesKey(bot, user), func(old []byte, found bool) ([]byte, bool) {
		var nb notebook
		if !found || json.Unmarshal(old, &nb) != nil || len(nb.Notes) == 0 {
			gone = 0
			return nil, false
		}
		gone = len(nb.Notes)
		nb.Notes = nil
		b, _ := json.Marshal(nb)
		return b, true
	})
	return gone, wrap("drop the notes", err)
}

// forgetNotes purges user's notes with bot ("": every bot) and counts
// them.
func (u *userData) forgetNotes(ctx context.Context, bot string, user int64) (int, error) {
	var keys []string
	count := 0
	err := scan(ctx, u.notes, "notes.>", func(key string, value []byte) {
		parts := strings.Split(key, ".")
		if parts[len(parts)-1] != fmt.Sprint(user) || bot != "" && parts[len(parts)-2] != keyPart(bot) {
			return
		}
		var nb notebook
		_ = json.Unmarshal(value, &nb) // unreadable: purged, uncounted
		count += len(nb.Notes)
		keys = append(keys, key)
	})
	for _, key := range keys {
		if err == nil {
			err = u.conn.patiently(ctx, "forget "+key, func(ctx context.Context) error { return u.notes.Purge(ctx, key) })
		}
	}
	return count, err
}
