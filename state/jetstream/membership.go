package jetstream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// membership keeps this instance in brainbot_members (a heartbeat, and a
// draining mark while it stops) and reads who else is there: the
// partitions the live members give this instance, and whether an
// instance holding a lock or a panel run is alive.
type membership struct {
	conn *conn
	kv   jsapi.KeyValue
}

// drainingPrefix marks, in brainbot_members, an instance that stopped
// pulling and finishes its work: the others take its partitions at once,
// and leave its conversations' locks to it until Release.
const drainingPrefix = "draining."

func (m *membership) heartbeat(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, m.conn.cfg.MemberTTL/3)
	defer cancel()
	_, err := m.kv.Put(hctx, keyPart(m.conn.cfg.Instance), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	switch {
	case err == nil:
		m.conn.health.answered() // an outage ends here on an idle instance
	case ctx.Err() != nil:
	case unavailable(err):
		m.conn.health.failed("membership heartbeat", err)
	default:
		m.conn.log.Warn("membership heartbeat failed", zap.Error(err))
	}
}

// assigned returns the partitions the live members give this instance;
// ok is false when the members could not be listed.
func (m *membership) assigned(ctx context.Context) (parts []int, ok bool) {
	lctx, cancel := context.WithTimeout(ctx, m.conn.cfg.MemberTTL/2)
	defer cancel()
	members, err := m.live(lctx)
	if err != nil {
		if ctx.Err() == nil && !unavailable(err) {
			m.conn.log.Warn("could not list the members; keeping the partitions", zap.Error(err))
		}
		return nil, false
	}
	return Assign(members, keyPart(m.conn.cfg.Instance), m.conn.cfg.Partitions), true
}

// live lists the members sharing the partitions, named as Assign takes
// them; a member draining (stopping) shares none.
func (m *membership) live(ctx context.Context) ([]string, error) {
	keys, err := m.kv.Keys(ctx)
	if err != nil && !errors.Is(err, jsapi.ErrNoKeysFound) {
		return nil, err
	}
	return slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, drainingPrefix) }), nil
}

// watchLeaving signals when an instance leaves the membership on its own
// (a graceful stop deletes its key): its partitions are taken at once,
// not at the next tick. Ticks still find the ones that expired.
func (m *membership) watchLeaving(ctx context.Context) <-chan struct{} {
	left := make(chan struct{}, 1)
	w, err := m.kv.WatchAll(ctx, jsapi.UpdatesOnly(), jsapi.MetaOnly())
	if err != nil {
		return left // the ticks alone
	}
	go func() {
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil || e.Operation() == jsapi.KeyValuePut {
				continue
			}
			select {
			case left <- struct{}{}:
			default:
			}
		}
	}()
	return left
}

// drain leaves the membership for the draining mark, kept until released
// is closed (Release), so that the partitions go to the others at once (a
// SIGTERM stalls no conversation for more than the rebalance tick) while
// the work still running here keeps its conversations.
func (m *membership) drain(released <-chan struct{}) {
	beat := func() {
		ctx, cancel := context.WithTimeout(context.Background(), m.conn.cfg.MemberTTL/3)
		defer cancel()
		_, _ = m.kv.Put(ctx, drainingPrefix+keyPart(m.conn.cfg.Instance), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	}
	beat()
	ctx, cancel := context.WithTimeout(context.Background(), m.conn.cfg.MemberTTL/3)
	_ = m.kv.Delete(ctx, keyPart(m.conn.cfg.Instance))
	cancel()
	go func() {
		tick := time.NewTicker(m.conn.cfg.MemberTTL / 5)
		defer tick.Stop()
		for {
			select {
			case <-released:
				return
			case <-tick.C:
				beat()
			}
		}
	}()
}

// leave deletes this instance's keys, member and draining.
func (m *membership) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.kv.Delete(ctx, keyPart(m.conn.cfg.Instance))
	_ = m.kv.Delete(ctx, drainingPrefix+keyPart(m.conn.cfg.Instance))
}

// isMember reports whether instance is live: a member, or draining (a
// stopping instance finishing its work).
func (m *membership) isMember(ctx context.Context, instance string) (bool, error) {
	for _, key := range []string{keyPart(instance), drainingPrefix + keyPart(instance)} {
		_, err := m.kv.Get(ctx, key)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jsapi.ErrKeyNotFound) {
			return false, err
		}
	}
	return false, nil
}
