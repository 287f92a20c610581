package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/state"
)

// conn is this instance's connection to NATS JetStream and what it knows
// of its health: every call that an outage may meet goes through
// patiently, which waits the outage out within Config.Patience.
type conn struct {
	cfg    Config
	nc     *nats.Conn
	js     jsapi.JetStream
	log    *zap.Logger
	health *health
	// closed is closed once the connection's last callbacks have run.
	closed <-chan struct{}
}

// Check reports whether NATS is connected and JetStream answers (for
// readiness and doctor).
func (c *conn) Check(ctx context.Context) error {
	if !c.nc.IsConnected() {
		c.health.failed("check NATS", nats.ErrDisconnected)
		return fmt.Errorf("not connected to NATS (%s): messages wait for it", c.nc.Status())
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		c.health.failed("check JetStream", err)
		return fmt.Errorf("NATS JetStream does not answer (messages wait for it): %w", err)
	}
	// A stream or bucket may still be without its quorum: the calls that
	// meet that say so, and the heartbeat says when it is over.
	if outage := c.Outage(); outage != "" {
		return errors.New(outage)
	}
	return nil
}

// Outage says why NATS does not answer this instance now ("": it does),
// from what the calls and the connection met, without asking NATS: for
// /status, which must answer during an outage.
func (c *conn) Outage() string {
	switch st := c.status(); {
	case !st.UnavailableSince.IsZero():
		return fmt.Sprintf("NATS JetStream unavailable for %v (%s: %v): messages wait for it",
			time.Since(st.UnavailableSince).Round(time.Second), st.UnavailableOp, st.UnavailableErr)
	case !st.Connected:
		return fmt.Sprintf("not connected to NATS (%s): messages wait for it", c.nc.Status())
	}
	return ""
}

// status is what Status says of the connection and its outages.
func (c *conn) status() Status {
	s := c.health.outage()
	s.Instance, s.Connected, s.Reconnects = c.cfg.Instance, c.nc.IsConnected(), c.nc.Stats().Reconnects
	return s
}

// attemptTimeout bounds one try of a call: JetStream answers in
// milliseconds when it is there at all.
const attemptTimeout = 2 * time.Second

// patiently runs call until it is answered, and while NATS is
// unavailable tries it again with backoff, within Config.Patience (or
// ctx's deadline, if sooner). An outage that outlasts it is an error
// wrapping state.ErrUnavailable: the message waiting on it is handed
// back, not answered with an error. what names the call in errors.
func (c *conn) patiently(ctx context.Context, what string, call func(ctx context.Context) error) error {
	deadline := time.Now().Add(c.cfg.Patience)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wait := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := call(actx)
		cancel()
		if ctx.Err() != nil && err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !unavailable(err) {
			c.health.answered()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
		c.health.failed(what, err)
		if time.Now().Add(wait).After(deadline) {
			return state.Unavailable("nats", fmt.Errorf("%s: %w: %w", what, state.ErrUnavailable, err))
		}
		sleep(ctx, wait)
		wait = min(2*wait, time.Second)
	}
}

// get reads key's value (found false: none), patiently.
func (c *conn) get(ctx context.Context, kv jsapi.KeyValue, key string) (value []byte, found bool, err error) {
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
func (c *conn) change(ctx context.Context, kv jsapi.KeyValue, key string, fn func(old []byte, found bool) ([]byte, bool)) error {
	return c.patiently(ctx, "change "+key, func(ctx context.Context) error { return changeOnce(ctx, kv, key, fn) })
}

func changeOnce(ctx context.Context, kv jsapi.KeyValue, key string, fn func(old []byte, found bool) ([]byte, bool)) error {
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

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
