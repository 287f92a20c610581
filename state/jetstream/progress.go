package jetstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/message"
)

// progress is what the work on one update recorded, in the progress
// bucket, so that a redelivery (after an instance died, or handed back
// its updates at a stop) means the same as a replay of the embedded
// journal: not counted against the daily limit twice, and asked to be
// sent again after two attempts cut short.
type progress struct {
	// Mode is set once the update was counted against the daily limit.
	Mode string `json:"mode,omitempty"`
	// Attempts counts how often work on it started.
	Attempts int `json:"attempts,omitempty"`
	// Delivery is the delivery count of the latest delivery whose work
	// started: an older one, still held by another instance since an
	// outage, must not start too.
	Delivery uint64 `json:"delivery,omitempty"`
}

// markKey names env's marks, in both buckets: its bot and update id, or
// for a scheduled message its id (any text, so encoded: a key's tokens
// take only some characters).
func markKey(env message.Envelope) string {
	if env.Scheduled != nil {
		return keyPart(env.Bot) + ".s-" + base64.RawURLEncoding.EncodeToString([]byte(env.Scheduled.ID))
	}
	return keyPart(env.Bot) + "." + strconv.FormatInt(env.UpdateID, 10)
}

// marks keeps the marks the work on each update leaves: its progress
// (brainbot_progress) until it is answered, and that it was answered
// (brainbot_answered). A delivery writes its marks here.
type marks struct {
	conn               *conn
	answered, progress jsapi.KeyValue
}

// read is what earlier deliveries of env recorded (none if it cannot be
// read: the update is then tried as if new).
func (m *marks) read(ctx context.Context, env message.Envelope) progress {
	var p progress
	e, err := m.progress.Get(ctx, markKey(env))
	switch {
	case errors.Is(err, jsapi.ErrKeyNotFound):
	case err != nil:
		m.conn.log.Warn("could not read the progress of a redelivered update; trying it as new", zap.String("bot", env.Bot),
			zap.Int64("update_id", env.UpdateID), zap.Error(err))
	default:
		_ = json.Unmarshal(e.Value(), &p) // written by record below: a struct of plain fields
	}
	return p
}

// charge records that env was counted against the daily limit, to be
// answered in mode.
func (m *marks) charge(ctx context.Context, env message.Envelope, mode string) error {
	return m.record(ctx, env, func(p *progress) { p.Mode = mode })
}

// attempt records that the work of env's delivery number delivered
// starts now, in mode, unless env was answered already or a newer
// delivery's work started: then superseded is true.
func (m *marks) attempt(ctx context.Context, env message.Envelope, delivered uint64, mode string) (superseded bool, err error) {
	_, answered, err := m.conn.get(ctx, m.answered, markKey(env))
	if err != nil || answered {
		return answered, err
	}
	err = m.record(ctx, env, func(p *progress) {
		if superseded = p.Delivery > delivered; !superseded {
			p.Mode, p.Attempts, p.Delivery = mode, p.Attempts+1, delivered
		}
	})
	return superseded, err
}

// answer marks env answered, within Config.Patience: an outage pauses
// the conversation here.
func (m *marks) answer(env message.Envelope) {
	bot, id, key := env.Bot, env.UpdateID, markKey(env)
	err := m.conn.patiently(context.Background(), "mark answered", func(ctx context.Context) error {
		_, err := m.answered.Put(ctx, key, []byte(m.conn.cfg.Instance))
		return err
	})
	if err != nil {
		m.conn.log.Warn("could not mark the update answered", zap.String("bot", bot), zap.Int64("update_id", id), zap.Error(err))
	}
}

// wasAnswered reports whether env is marked answered (false when that
// cannot be read).
func (m *marks) wasAnswered(ctx context.Context, env message.Envelope) bool {
	_, err := m.answered.Get(ctx, markKey(env))
	return err == nil
}

// record applies step to env's recorded progress.
func (m *marks) record(ctx context.Context, env message.Envelope, step func(*progress)) error {
	err := m.conn.change(ctx, m.progress, markKey(env), func(old []byte, _ bool) ([]byte, bool) {
		var p progress
		_ = json.Unmarshal(old, &p) // none yet: zero
		step(&p)
		b, _ := json.Marshal(p) // a struct of plain fields: cannot fail
		return b, true
	})
	if err != nil {
		return fmt.Errorf("cluster: record the progress of update %d of %s: %w", env.UpdateID, env.Bot, err)
	}
	return nil
}
