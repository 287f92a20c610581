package jetstream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/state"
)

// An outage of NATS (or of a JetStream quorum) is a pause: every call
// that meets one is tried again with backoff (patiently), the instance
// logs its start and its end once each, and Status reports it, for
// /readyz and the metrics.

// health follows whether JetStream answers this instance.
type health struct {
	log *zap.Logger

	mu sync.Mutex
	// down is when the current outage began (zero: JetStream answers),
	// cause the last error it gave and op the call that met it.
	down    time.Time
	cause   error
	op      string
	outages uint64
	// up is when the last outage ended.
	up time.Time
}

// failed records that op met err, an outage.
func (h *health) failed(op string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cause, h.op = err, op
	if !h.down.IsZero() {
		return
	}
	h.down = time.Now()
	h.outages++
	h.log.Warn("NATS unavailable: the cluster pauses until it is back (polling waits, messages wait, nothing is answered with an error)",
		zap.String("cause", "nats unavailable"), zap.String("op", op), zap.Error(err))
}

// answered records that JetStream answered a call.
func (h *health) answered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down.IsZero() {
		return
	}
	h.log.Info("NATS available again: the cluster goes on", zap.Duration("outage_ms", time.Since(h.down).Round(time.Millisecond)),
		zap.String("last_op", h.op), zap.NamedError("last_error", h.cause))
	h.down, h.cause, h.op, h.up = time.Time{}, nil, "", time.Now()
}

// quiet reports whether JetStream has answered for at least d: no outage
// now, nor one that ended less than d ago.
func (h *health) quiet(d time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down.IsZero() && time.Since(h.up) >= d
}

// outage is what Status reports of the current outage (a zero
// UnavailableSince: JetStream answers) and how many there were.
func (h *health) outage() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Status{UnavailableSince: h.down, UnavailableOp: h.op, UnavailableErr: h.cause, Outages: h.outages}
}

// unavailable reports whether err means NATS or JetStream cannot serve a
// call now (no connection, no responders, no quorum, a timeout), rather
// than an answer (key not found, wrong revision...).
func unavailable(err error) bool {
	var apiErr *jsapi.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, state.ErrUnavailable):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, nats.ErrNoServers),
		errors.Is(err, jsapi.ErrNoStreamResponse), errors.Is(err, jsapi.ErrJetStreamNotEnabled),
		errors.Is(err, jsapi.ErrJetStreamNotEnabledForAccount), errors.Is(err, jsapi.ErrServerShutdown),
		errors.Is(err, jsapi.ErrConsumerLeadershipChanged):
		return true
	case errors.As(err, &apiErr):
		// 503: JetStream is not available now (no quorum, restarting).
		return apiErr.Code == 503
	}
	return false
}
