package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/bot/message"
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

func progressKey(env message.Envelope) string { return answeredKey(env.Bot, env.UpdateID) }

// readProgress is what earlier deliveries of env recorded (none if it
// cannot be read: the update is then tried as if new).
func (c *Cluster) readProgress(ctx context.Context, env message.Envelope) progress {
	var p progress
	e, err := c.progress.Get(ctx, progressKey(env))
	switch {
	case errors.Is(err, jsapi.ErrKeyNotFound):
	case err != nil:
		c.log.Warn("could not read the progress of a redelivered update; trying it as new", zap.String("bot", env.Bot),
			zap.Int64("update_id", env.UpdateID), zap.Error(err))
	default:
		_ = json.Unmarshal(e.Value(), &p) // written by change below: a struct of plain fields
	}
	return p
}

// recordProgress applies step to env's recorded progress.
func (c *Cluster) recordProgress(ctx context.Context, env message.Envelope, step func(*progress)) error {
	err := c.change(ctx, c.progress, progressKey(env), func(old []byte, _ bool) ([]byte, bool) {
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
