package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"

	"brainbot/message"
	"brainbot/state"
)

// State is what the bots keep between messages, shared by every instance
// in JetStream KV: a facade over records (sessions, voice toggles, the
// brains of the Telegram bots), tally (daily counters, spending, usage),
// buttonSets, panelRuns, memories (the notes kept about users) and
// schedules (reminders, and what check-ins go by). Values are changed by
// revision (optimistic concurrency), so two instances never lose a count.
//
// The journal is not here: in a cluster the stream keeps the updates
// until they are answered (updates), with the pollers' offsets.
type State struct {
	*records
	*tally
	*buttonSets
	*panelRuns
	*memories
	*schedules
}

// records keeps, in brainbot_state, each conversation's session, each
// user's voice toggle and the brain of each Telegram bot; it reads the
// partitions this instance owns from updates (RecentSessions).
type records struct {
	conn    *conn
	kv      jsapi.KeyValue
	updates *updates
}

type sessionValue struct {
	ID       string    `json:"id"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	// Conversation names whose it is (keys lose characters: keyPart);
	// values of earlier releases have none.
	Conversation *message.Key `json:"conversation,omitempty"`
}

func sessionKey(c message.Key) string {
	return fmt.Sprintf("session.%s.%d.%d", keyPart(c.Bot), c.Chat, c.Thread)
}

// Session returns the conversation's current session; ok is false if
// there is none.
func (r *records) Session(ctx context.Context, c message.Key) (state.Session, bool, error) {
	val, found, err := r.conn.get(ctx, r.kv, sessionKey(c))
	if err != nil || !found {
		return state.Session{}, false, wrap("read session", err)
	}
	var v sessionValue
	if err := json.Unmarshal(val, &v); err != nil {
		return state.Session{}, false, fmt.Errorf("read session: %w", err)
	}
	return state.Session{ID: v.ID, Created: v.Created, LastUsed: v.LastUsed}, true, nil
}

// UseSession makes id the conversation's session, used now.
func (r *records) UseSession(ctx context.Context, c message.Key, id string, now time.Time) error {
	var replaced string
	err := r.conn.change(ctx, r.kv, sessionKey(c), func(old []byte, found bool) ([]byte, bool) {
		v := sessionValue{ID: id, Created: now.UTC(), LastUsed: now.UTC(), Conversation: &c}
		var prev sessionValue
		replaced = ""
		if found && json.Unmarshal(old, &prev) == nil {
			if prev.ID == id {
				v.Created = prev.Created
			} else {
				replaced = prev.ID
			}
		}
		b, _ := json.Marshal(v)
		return b, true
	})
	if err != nil || replaced == "" {
		return err
	}
	return r.keepPast(ctx, c, replaced)
}

// keepPast adds session, replaced or reset, to c's past sessions, so a
// forget finds their transcripts.
func (r *records) keepPast(ctx context.Context, c message.Key, session string) error {
	return r.conn.change(ctx, r.kv, pastKey(c), func(old []byte, _ bool) ([]byte, bool) {
		var past []string
		_ = json.Unmarshal(old, &past) // none yet, or unreadable: start anew
		if slices.Contains(past, session) {
			return nil, false
		}
		b, _ := json.Marshal(append(past, session))
		return b, true
	})
}

// ResetSession ends the conversation's session and returns its id ("" if
// there was none).
func (r *records) ResetSession(ctx context.Context, c message.Key, now time.Time) (string, error) {
	sess, ok, err := r.Session(ctx, c)
	if err != nil || !ok {
		return "", err
	}
	err = r.conn.patiently(ctx, "reset session", func(ctx context.Context) error { return r.kv.Delete(ctx, sessionKey(c)) })
	if err != nil {
		return "", err
	}
	return sess.ID, r.keepPast(ctx, c, sess.ID)
}

func voiceKey(bot string, user int64) string { return fmt.Sprintf("voice.%s.%d", keyPart(bot), user) }

// Voice returns the user's voice-reply toggle; set is false if they never
// chose.
func (r *records) Voice(ctx context.Context, bot string, user int64) (on, set bool, err error) {
	val, found, err := r.conn.get(ctx, r.kv, voiceKey(bot, user))
	return string(val) == "1", found, wrap("read voice toggle", err)
}

// SetVoice records the user's voice-reply toggle.
func (r *records) SetVoice(ctx context.Context, bot string, user int64, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	return r.conn.patiently(ctx, "save voice toggle", func(ctx context.Context) error {
		_, err := r.kv.Put(ctx, voiceKey(bot, user), []byte(v))
		return err
	})
}

func telegramBotKey(number string) string { return "telegram_bot." + keyPart(number) }

// HoldTelegramBot records that brain (its id) has the Telegram bot number
// (the part of a token before the colon), for every instance.
func (r *records) HoldTelegramBot(ctx context.Context, number, brain string, _ time.Time) error {
	if _, err := r.kv.Put(ctx, telegramBotKey(number), []byte(brain)); err != nil {
		return fmt.Errorf("record the brain of Telegram bot %s: %w", number, err)
	}
	return nil
}

// TelegramBotHolders returns the brain that has each Telegram bot, by bot
// number.
func (r *records) TelegramBotHolders(ctx context.Context) (map[string]string, error) {
	w, err := r.kv.Watch(ctx, "telegram_bot.*", jsapi.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read the brains of the Telegram bots: %w", err)
	}
	defer w.Stop()
	holders := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read the brains of the Telegram bots: %w", ctx.Err())
		case e := <-w.Updates():
			if e == nil { // the values there were are all read
				return holders, nil
			}
			holders[strings.TrimPrefix(e.Key(), "telegram_bot.")] = string(e.Value())
		}
	}
}
