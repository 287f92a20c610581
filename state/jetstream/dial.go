package jetstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Refusal is an answer of NATS that no retry changes: credentials it
// does not take, TLS it wants or cannot give, a server too old, a
// configuration JetStream refuses. An instance meeting one at its start
// stops for good; one that merely cannot reach NATS waits for it.
type Refusal struct{ Err error }

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// Refused reports whether err is, or wraps, a Refusal.
func Refused(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// dialWait is the first wait between two tries to reach NATS, and
// dialWaitMax the longest: a NATS coming up a minute after this instance
// (a reboot) is joined within seconds of it, and the log has a line every
// few seconds, not many a second.
const (
	dialWait    = 250 * time.Millisecond
	dialWaitMax = 8 * time.Second
)

// dial connects to NATS at cfg.URL. With cfg.WaitForNATS, while no
// server there can be reached (NATS starting after this instance, a
// network not up yet) it tries again with backoff until ctx ends, logging
// each try; a refusal ends it at once.
func dial(ctx context.Context, cfg Config, opts []nats.Option) (*nats.Conn, error) {
	wait := dialWait
	for try := 1; ; try++ {
		nc, err := nats.Connect(cfg.URL, opts...)
		if err == nil {
			if try > 1 {
				cfg.Log.Info("NATS reached", zap.String("url", Redact(cfg.URL)), zap.Int("tries", try))
			}
			return nc, nil
		}
		err = fmt.Errorf("cluster: connect to %s: %w", Redact(cfg.URL), err)
		if refusedConnect(err) {
			return nil, &Refusal{err}
		}
		if !cfg.WaitForNATS {
			return nil, err
		}
		cfg.Log.Warn("waiting for NATS: cannot reach it yet; trying again", zap.String("url", Redact(cfg.URL)),
			zap.Int("try", try), zap.Duration("again_in_ms", wait), zap.Error(err))
		sleep(ctx, wait)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stopped waiting for NATS after %d tries: %w", try, err)
		}
		wait = min(2*wait, dialWaitMax)
	}
}

// refusedConnect reports whether a failed connection is a refusal of the
// server (credentials, TLS) rather than a server not reached.
func refusedConnect(err error) bool {
	var cert *tls.CertificateVerificationError
	for _, refusal := range []error{nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrAccountAuthExpired,
		nats.ErrNkeysNotSupported, nats.ErrSecureConnRequired, nats.ErrSecureConnWanted} {
		if errors.Is(err, refusal) {
			return true
		}
	}
	return errors.As(err, &cert)
}
