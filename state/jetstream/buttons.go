package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsapi "github.com/nats-io/nats.go/jetstream"

	"brainbot/message"
	"brainbot/state"
)

// What the buttons under the bots' messages mean, in their own bucket
// (entries expire after state.MaxButtonsAge): one entry per message's
// buttons by id, and per conversation the id of its open question, so a
// message typed there closes it.

// buttonSets keeps what the buttons under the bots' messages mean, in
// brainbot_buttons.
type buttonSets struct {
	conn *conn
	kv   jsapi.KeyValue
}

func buttonsKey(id string) string { return "b." + keyPart(id) }

func openQuestionKey(c message.Key) string {
	return fmt.Sprintf("open.%s.%d.%d", keyPart(c.Bot), c.Chat, c.Thread)
}

// SaveButtons records b; a question closes the one open before it.
func (bs *buttonSets) SaveButtons(ctx context.Context, b state.Buttons) error {
	if b.Kind == state.ButtonsQuestion {
		if _, err := bs.CloseQuestions(ctx, b.Conversation, 0); err != nil {
			return fmt.Errorf("save buttons: %w", err)
		}
	}
	v, _ := json.Marshal(b) // plain fields: cannot fail
	if _, err := bs.kv.Put(ctx, buttonsKey(b.ID), v); err != nil {
		return fmt.Errorf("save buttons: %w", err)
	}
	if b.Kind == state.ButtonsQuestion {
		if _, err := bs.kv.Put(ctx, openQuestionKey(b.Conversation), []byte(b.ID)); err != nil {
			return fmt.Errorf("save buttons: %w", err)
		}
	}
	return nil
}

// LookupButtons returns the buttons with id; ok is false for none.
func (bs *buttonSets) LookupButtons(ctx context.Context, id string) (state.Buttons, bool, error) {
	e, err := bs.kv.Get(ctx, buttonsKey(id))
	if errors.Is(err, jsapi.ErrKeyNotFound) {
		return state.Buttons{}, false, nil
	}
	if err != nil {
		return state.Buttons{}, false, fmt.Errorf("look up buttons: %w", err)
	}
	var b state.Buttons
	if err := json.Unmarshal(e.Value(), &b); err != nil {
		return state.Buttons{}, false, fmt.Errorf("look up buttons: %w", err)
	}
	return b, b.ID == id, nil
}

// UseButtons marks buttons id used by the tap in update, by revision, so
// of two instances only one tap wins; the same update again uses them
// again.
func (bs *buttonSets) UseButtons(ctx context.Context, id string, update int64) (bool, error) {
	return bs.setUsed(ctx, id, func(used int64) (int64, bool) { return update, used == 0 || used == update })
}

// setUsed changes the UsedBy of buttons id to what next says, when it
// says to; it reports whether it did.
func (bs *buttonSets) setUsed(ctx context.Context, id string, next func(used int64) (int64, bool)) (bool, error) {
	var changed bool
	err := bs.conn.change(ctx, bs.kv, buttonsKey(id), func(old []byte, found bool) ([]byte, bool) {
		var b state.Buttons
		changed = false
		if !found || json.Unmarshal(old, &b) != nil {
			return nil, false
		}
		if b.UsedBy, changed = next(b.UsedBy); !changed {
			return nil, false
		}
		v, _ := json.Marshal(b)
		return v, true
	})
	if err != nil {
		return false, fmt.Errorf("use buttons: %w", err)
	}
	return changed, nil
}

// CloseQuestions closes the conversation's open question, if any and it
// asked user (any user: 0), and returns it.
func (bs *buttonSets) CloseQuestions(ctx context.Context, c message.Key, user int64) ([]state.Buttons, error) {
	e, err := bs.kv.Get(ctx, openQuestionKey(c))
	if errors.Is(err, jsapi.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("close questions: %w", err)
	}
	id := string(e.Value())
	if user != 0 {
		q, _, err := bs.LookupButtons(ctx, id)
		if err != nil || q.User != user { // open to anyone: closed by no one user
			return nil, err
		}
	}
	closed, err := bs.setUsed(ctx, id, func(used int64) (int64, bool) { return state.ButtonsClosed, used == 0 })
	if err != nil {
		return nil, fmt.Errorf("close questions: %w", err)
	}
	// Only the entry read: a question saved meanwhile stays open.
	if err := bs.kv.Delete(ctx, openQuestionKey(c), jsapi.LastRevision(e.Revision())); err != nil && !isConflict(err) {
		return nil, fmt.Errorf("close questions: %w", err)
	}
	if !closed {
		return nil, nil
	}
	b, _, err := bs.LookupButtons(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("close questions: %w", err)
	}
	return []state.Buttons{b}, nil
}

// PlaceButtons records the message buttons id went out under.
func (bs *buttonSets) PlaceButtons(ctx context.Context, id string, messageID int) error {
	return bs.update(ctx, id, "place buttons", func(b *state.Buttons) { b.MessageID = messageID })
}

// KeepButtonsFile records the file a tap on buttons id made.
func (bs *buttonSets) KeepButtonsFile(ctx context.Context, id, path string) error {
	return bs.update(ctx, id, "keep the buttons' file", func(b *state.Buttons) { b.File = path })
}

// update changes buttons id with fix, by revision.
func (bs *buttonSets) update(ctx context.Context, id, what string, fix func(*state.Buttons)) error {
	err := bs.conn.change(ctx, bs.kv, buttonsKey(id), func(old []byte, found bool) ([]byte, bool) {
		var b state.Buttons
		if !found || json.Unmarshal(old, &b) != nil {
			return nil, false
		}
		fix(&b)
		v, _ := json.Marshal(b)
		return v, true
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
