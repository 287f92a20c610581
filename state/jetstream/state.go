package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/bot/message"
	"brainbot/state"
)

// State is what the bots keep between messages, shared by every instance
// in JetStream KV: sessions, voice toggles and update offsets in one
// bucket, daily counters and spending in a bucket whose entries expire
// after two days, usage records in a stream. Counters are updated by
// revision (optimistic concurrency), so two instances never lose a count.
//
// It has the methods the bots' conversations need of *sqlite.Store. The
// journal is not here: in a cluster the stream keeps the updates until
// they are answered (work.go), and the update offsets are its (Offset).
type State struct{ c *Cluster }

// State returns the shared state.
func (c *Cluster) State() *State { return &State{c: c} }

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
func (s *State) Session(ctx context.Context, c message.Key) (state.Session, bool, error) {
	val, found, err := s.c.get(ctx, s.c.state, sessionKey(c))
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
func (s *State) UseSession(ctx context.Context, c message.Key, id string, now time.Time) error {
	return s.c.change(ctx, s.c.state, sessionKey(c), func(old []byte, found bool) ([]byte, bool) {
		v := sessionValue{ID: id, Created: now.UTC(), LastUsed: now.UTC(), Conversation: &c}
		var prev sessionValue
		if found && json.Unmarshal(old, &prev) == nil && prev.ID == id {
			v.Created = prev.Created
		}
		b, _ := json.Marshal(v)
		return b, true
	})
}

// ResetSession ends the conversation's session and returns its id ("" if
// there was none).
func (s *State) ResetSession(ctx context.Context, c message.Key, now time.Time) (string, error) {
	sess, ok, err := s.Session(ctx, c)
	if err != nil || !ok {
		return "", err
	}
	err = s.c.patiently(ctx, "reset session", func(ctx context.Context) error { return s.c.state.Delete(ctx, sessionKey(c)) })
	if err != nil {
		return "", err
	}
	return sess.ID, nil
}

func voiceKey(bot string, user int64) string { return fmt.Sprintf("voice.%s.%d", keyPart(bot), user) }

// Voice returns the user's voice-reply toggle; set is false if they never
// chose.
func (s *State) Voice(ctx context.Context, bot string, user int64) (on, set bool, err error) {
	val, found, err := s.c.get(ctx, s.c.state, voiceKey(bot, user))
	return string(val) == "1", found, wrap("read voice toggle", err)
}

// SetVoice records the user's voice-reply toggle.
func (s *State) SetVoice(ctx context.Context, bot string, user int64, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	return s.c.patiently(ctx, "save voice toggle", func(ctx context.Context) error {
		_, err := s.c.state.Put(ctx, voiceKey(bot, user), []byte(v))
		return err
	})
}

func day(t time.Time) string { return t.UTC().Format("20060102") }

// TakeDaily counts one message for the user today unless limit (> 0) is
// reached (then ok is false and nothing is counted).
func (s *State) TakeDaily(ctx context.Context, bot string, user int64, limit int, now time.Time) (ok bool, resetAt time.Time, err error) {
	resetAt = state.NextReset(now)
	key := fmt.Sprintf("count.%s.%s.%d", day(now), keyPart(bot), user)
	err = s.c.change(ctx, s.c.daily, key, func(old []byte, _ bool) ([]byte, bool) {
		n, _ := strconv.Atoi(string(old))
		if limit > 0 && n >= limit {
			ok = false
			return nil, false
		}
		ok = true
		return []byte(strconv.Itoa(n + 1)), true
	})
	if err != nil {
		return false, resetAt, fmt.Errorf("count daily message: %w", err)
	}
	return ok, resetAt, nil
}

// DailyCount is how many messages the user sent on now's UTC day.
func (s *State) DailyCount(ctx context.Context, bot string, user int64, now time.Time) (int, error) {
	val, _, err := s.c.get(ctx, s.c.daily, fmt.Sprintf("count.%s.%s.%d", day(now), keyPart(bot), user))
	n, _ := strconv.Atoi(string(val))
	return n, wrap("read daily count", err)
}

func spentKey(now time.Time, bot string, user int64) string {
	who := "all"
	if user > 0 {
		who = strconv.FormatInt(user, 10)
	}
	return fmt.Sprintf("spent.%s.%s.%s", day(now), keyPart(bot), who)
}

// SpentToday is what the bot's requests cost on now's UTC day; with
// user > 0, only that user's.
func (s *State) SpentToday(ctx context.Context, bot string, user int64, now time.Time) (float64, error) {
	val, _, err := s.c.get(ctx, s.c.daily, spentKey(now, bot, user))
	usd, _ := strconv.ParseFloat(string(val), 64)
	return usd, wrap("spent today", err)
}

// RecordUsage appends the request's record to the usage stream and adds
// its cost to the day's spending of the bot and of the user. A record
// NATS cannot take now is kept in the spool (Config.SpoolDir) and written
// when it is back.
func (s *State) RecordUsage(ctx context.Context, u state.Usage) error {
	err := s.c.writeUsage(ctx, u)
	if !errors.Is(err, state.ErrUnavailable) || s.c.spool == nil {
		return err
	}
	if kerr := s.c.spool.keep(u); kerr != nil {
		return fmt.Errorf("%w (and could not keep it for later: %w)", err, kerr)
	}
	s.c.log.Info("usage record kept until NATS is back", zap.String("request_id", u.RequestID), zap.Error(err))
	return nil
}

// writeUsage publishes u (once: its message id is the request, who and
// what, and the time) and adds its cost to the day's spending.
func (c *Cluster) writeUsage(ctx context.Context, u state.Usage) error {
	rec, err := json.Marshal(u)
	if err != nil {
		return err
	}
	msg := nats.NewMsg("brainbot.usage." + keyPart(u.Bot))
	msg.Data = rec
	msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s/%s/%d/%s/%s@%d", u.RequestID, u.Bot, u.User, u.Mode, u.Outcome, u.At.UnixNano()))
	err = c.patiently(ctx, "record usage", func(ctx context.Context) error {
		_, err := c.js.PublishMsg(ctx, msg)
		return err
	})
	if err != nil {
		return err
	}
	usd := u.ClaudeUSD + u.OpenAIUSD
	if usd == 0 {
		return nil
	}
	for _, user := range []int64{0, u.User} {
		err := c.change(ctx, c.daily, spentKey(u.At, u.Bot, user), func(old []byte, _ bool) ([]byte, bool) {
			v, _ := strconv.ParseFloat(string(old), 64)
			return []byte(strconv.FormatFloat(v+usd, 'g', -1, 64)), true
		})
		if err != nil {
			return fmt.Errorf("record spending: %w", err)
		}
	}
	return nil
}

func offsetKey(poller string) string { return "offset." + keyPart(poller) }

// Offset is the last update id the poller stored (0 if none).
func (c *Cluster) Offset(ctx context.Context, poller string) (int64, error) {
	val, found, err := c.get(ctx, c.state, offsetKey(poller))
	if err != nil || !found {
		return 0, wrap("read update offset", err)
	}
	return strconv.ParseInt(string(val), 10, 64)
}

// setOffset records that the poller stored updateID (never moving back).
func (c *Cluster) setOffset(ctx context.Context, poller string, updateID int64) error {
	err := c.change(ctx, c.state, offsetKey(poller), func(old []byte, _ bool) ([]byte, bool) {
		if n, _ := strconv.ParseInt(string(old), 10, 64); n >= updateID {
			return nil, false
		}
		return []byte(strconv.FormatInt(updateID, 10)), true
	})
	if err != nil {
		return fmt.Errorf("save update offset: %w", err)
	}
	return nil
}

// get reads key's value (found false: none), patiently.
func (c *Cluster) get(ctx context.Context, kv jsapi.KeyValue, key string) (value []byte, found bool, err error) {
	err = c.patiently(ctx, "read "+key, func(ctx context.Context) error {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jsapi.ErrKeyNotFound) {
			value, found = nil, false
			return nil
		}
		if err != nil {
			return err
		}
		value, found = e.Value(), true
		return nil
	})
	return value, found, err
}

// change applies fn to key's value by revision until no other writer came
// between (optimistic concurrency), patiently. fn returns the new value,
// or false to leave it.
func (c *Cluster) change(ctx context.Context, kv jsapi.KeyValue, key string, fn func(old []byte, found bool) ([]byte, bool)) error {
	return c.patiently(ctx, "change "+key, func(ctx context.Context) error { return c.changeOnce(ctx, kv, key, fn) })
}

func (c *Cluster) changeOnce(ctx context.Context, kv jsapi.KeyValue, key string, fn func(old []byte, found bool) ([]byte, bool)) error {
	for range 100 {
		e, err := kv.Get(ctx, key)
		var old []byte
		var rev uint64
		switch {
		case errors.Is(err, jsapi.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			old, rev = e.Value(), e.Revision()
		}
		next, write := fn(old, rev != 0)
		if !write {
			return nil
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, next)
		} else {
			_, err = kv.Update(ctx, key, next, rev)
		}
		if err == nil {
			return nil
		}
		if !isConflict(err) {
			return err
		}
	}
	return fmt.Errorf("%s: too many concurrent writers", key)
}

// wrap names what failed, keeping nil nil.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isConflict(err error) bool {
	var apiErr *jsapi.APIError
	return errors.Is(err, jsapi.ErrKeyExists) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jsapi.JSErrCodeStreamWrongLastSequence
}

// Panels: a run is started once per /panel message and one at a time per
// chat, whichever instance's member bot saw the message first (created
// keys decide). The chat's marker lives in a bucket with a TTL, refreshed
// with every step, so a run whose instance died frees its chat.

type panelValue struct {
	state.PanelRun
	Running bool `json:"running"`
	// Owner is the instance running it (panels.go).
	Owner string `json:"owner,omitempty"`
}

func panelStartKey(chat int64, message int) string { return fmt.Sprintf("start.%d.%d", chat, message) }
func panelChatKey(chat int64) string               { return fmt.Sprintf("chat.%d", chat) }
func panelRunKey(id string) string                 { return "run." + keyPart(id) }

// StartPanel records a new running panel run, unless one exists for the
// same message (state.ErrPanelStarted) or one still runs in the chat
// (state.ErrPanelBusy).
func (s *State) StartPanel(ctx context.Context, r state.PanelRun) error {
	if _, err := s.c.panels.Create(ctx, panelStartKey(r.Chat, r.MessageID), []byte(r.ID)); err != nil {
		if errors.Is(err, jsapi.ErrKeyExists) {
			return state.ErrPanelStarted
		}
		return fmt.Errorf("start panel: %w", err)
	}
	if _, err := s.c.panels.Create(ctx, panelChatKey(r.Chat), []byte(r.ID)); err != nil {
		if errors.Is(err, jsapi.ErrKeyExists) {
			return state.ErrPanelBusy
		}
		return fmt.Errorf("start panel: %w", err)
	}
	s.c.ownRun(r.ID, true)
	return s.putPanel(ctx, panelValue{PanelRun: r, Running: true, Owner: s.c.cfg.Instance})
}

func (s *State) putPanel(ctx context.Context, v panelValue) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := s.c.panels.Put(ctx, panelRunKey(v.ID), b); err != nil {
		return fmt.Errorf("save panel: %w", err)
	}
	return nil
}

// SavePanel stores a run's state; finished marks it no longer running and
// frees its chat.
func (s *State) SavePanel(ctx context.Context, id string, run []byte, finished bool, now time.Time) error {
	e, err := s.c.panels.Get(ctx, panelRunKey(id))
	if err != nil {
		return fmt.Errorf("store: no panel run %s: %w", id, err)
	}
	var v panelValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return err
	}
	v.Run, v.Running, v.Owner = run, !finished, s.c.cfg.Instance
	if err := s.putPanel(ctx, v); err != nil {
		return err
	}
	if finished {
		s.c.ownRun(id, false)
		_ = s.c.panels.Delete(ctx, panelChatKey(v.Chat)) // expires anyway
		return nil
	}
	_, err = s.c.panels.Put(ctx, panelChatKey(v.Chat), []byte(id)) // refresh
	return err
}

func telegramBotKey(number string) string { return "telegram_bot." + keyPart(number) }

// HoldTelegramBot records that brain (its id) has the Telegram bot number
// (the part of a token before the colon), for every instance.
func (s *State) HoldTelegramBot(ctx context.Context, number, brain string, _ time.Time) error {
	if _, err := s.c.state.Put(ctx, telegramBotKey(number), []byte(brain)); err != nil {
		return fmt.Errorf("record the brain of Telegram bot %s: %w", number, err)
	}
	return nil
}

// TelegramBotHolders returns the brain that has each Telegram bot, by bot
// number.
func (s *State) TelegramBotHolders(ctx context.Context) (map[string]string, error) {
	w, err := s.c.state.Watch(ctx, "telegram_bot.*", jsapi.IgnoreDeletes())
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
