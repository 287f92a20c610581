package jetstream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// membership keeps this instance in brainbot_members (a heartbeat, and a
// draining mark while it stops) and reads who else is there: the
// partitions the members give this instance, and whether an instance
// holding a lock or a panel run is alive.
type membership struct {
	conn *conn
	kv   jsapi.KeyValue

	mu sync.Mutex
	// known are the members of the last spread (view).
	known []string
	// awaited are the members of the spread before the last outage not
	// back yet (noteOutage), and those kept in it since although absent
	// (await). One dropped is logged as not back.
	awaited map[string]*awaitedMember
	// outages is how many outages noteOutage has seen.
	outages uint64
}

// awaitedMember is a member awaited after an outage: the revision of
// its heartbeat then (0: none, or unknown), and whether it was logged as
// kept in the spread although absent.
type awaitedMember struct {
	rev  uint64
	told bool
}

// drainingPrefix marks, in brainbot_members, an instance that stopped
// pulling and finishes its work: the others take its partitions at once,
// and leave its conversations' locks to it until Release.
const drainingPrefix = "draining."

func (m *membership) heartbeat(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, m.conn.cfg.MemberTTL/3)
	defer cancel()
	_, err := m.kv.Put(hctx, keyPart(m.conn.cfg.Instance), []byte(time.Now().UTC().Format(time.RFC3339Nano)+presenceMark))
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

// keepBeating beats every fifth of a member TTL until ctx ends, apart
// from the work loop: listing the members and moving partitions can take
// a second or more on a saturated machine, and a heartbeat late by a
// member TTL hands this instance's partitions to the others, only to have
// them handed back a moment later. The channel is closed once it stopped.
func (m *membership) keepBeating(ctx context.Context) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(m.conn.cfg.MemberTTL / 5)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				m.heartbeat(ctx)
			}
		}
	}()
	return stopped
}

// assigned returns the partitions the members give this instance; ok is
// false when the members could not be listed.
func (m *membership) assigned(ctx context.Context) (parts []int, ok bool) {
	lctx, cancel := context.WithTimeout(ctx, m.conn.cfg.MemberTTL/2)
	defer cancel()
	members, err := m.view(lctx)
	if err != nil {
		if ctx.Err() == nil && !unavailable(err) {
			m.conn.log.Warn("could not list the members; keeping the partitions", zap.Error(err))
		}
		return nil, false
	}
	return Assign(members, keyPart(m.conn.cfg.Instance), m.conn.cfg.Partitions), true
}

// view lists the members the partitions and the leases are spread over,
// named as Assign takes them: the live ones (a member draining shares
// none) and, until this instance's NATS has answered for ReturnWait after
// an outage, the members of the spread before it that are not back yet.
//
// An outage longer than a member TTL expires every heartbeat, and each
// instance comes back at its own pace (its reconnection, its next beat, a
// loaded CPU): one back first would list itself almost alone and take the
// others' partitions, only to hand them back a moment later. Waiting one
// member TTL after the outage was not enough on a loaded machine; so the
// spread keeps every member it had until it is back, and the rendezvous
// hash gives each one back exactly its old partitions. One that does not
// come back within ReturnWait is taken for dead, as it would be without
// an outage (a member draining is dropped at once).
func (m *membership) view(ctx context.Context) ([]string, error) {
	keys, err := m.kv.Keys(ctx)
	if err != nil && !errors.Is(err, jsapi.ErrNoKeysFound) {
		return nil, err
	}
	var live, draining []string
	for _, k := range keys {
		if name, ok := strings.CutPrefix(k, drainingPrefix); ok {
			draining = append(draining, name)
		} else {
			live = append(live, k)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noteOutage(ctx)
	returning := !m.conn.health.quiet(m.conn.cfg.ReturnWait)
	for _, k := range m.known {
		awaited := m.awaited[k]
		there := slices.Contains(live, k)
		switch {
		case slices.Contains(draining, k), there && (awaited == nil || m.beatSince(ctx, k, awaited)):
			delete(m.awaited, k)
		case there: // its heartbeat from before the outage, not expired yet
		case returning:
			live = append(live, k)
			if k != keyPart(m.conn.cfg.Instance) {
				m.await(k)
			}
		case awaited != nil:
			delete(m.awaited, k)
			m.conn.log.Warn("member not back after the NATS outage: its partitions go to the others",
				zap.String("member", k), zap.Duration("return_wait_ms", m.conn.cfg.ReturnWait))
		}
	}
	m.known = live
	return live, nil
}

// noteOutage takes, at the first view after each outage, the members of
// the spread before it (m.known: no view lists the members during it) as
// awaited, with their heartbeat's revision: each until it beats again,
// or is dropped. A member dropped while awaited is logged as not back,
// also one whose last heartbeat from before the outage outlived the
// return wait, or that no view saw absent within it (a loaded machine).
// Called with m.mu held.
func (m *membership) noteOutage(ctx context.Context) {
	n := m.conn.health.outage().Outages
	if n == m.outages {
		return
	}
	m.outages = n
	for _, k := range m.known {
		if m.awaited[k] == nil && k != keyPart(m.conn.cfg.Instance) {
			rev, _ := m.heartbeatRev(ctx, k) // 0 when none: any beat then is one since
			m.awaited[k] = &awaitedMember{rev: rev}
		}
	}
}

// beatSince reports whether awaited member k has beaten since it was
// awaited: it is back. A heartbeat gone meanwhile (expired between the
// listing and now) is no beat.
func (m *membership) beatSince(ctx context.Context, k string, awaited *awaitedMember) bool {
	rev, ok := m.heartbeatRev(ctx, k)
	return ok && rev != awaited.rev
}

// heartbeatRev is the revision of k's heartbeat; ok is false when there
// is none, or it could not be read.
func (m *membership) heartbeatRev(ctx context.Context, k string) (rev uint64, ok bool) {
	e, err := m.kv.Get(ctx, k)
	if err != nil {
		return 0, false
	}
	return e.Revision(), true
}

// await logs, once, that member k is kept in the spread although absent
// while NATS has answered for a member TTL (a live member has beaten by
// then, unless it is slow to come back).
func (m *membership) await(k string) {
	awaited := m.awaited[k]
	if awaited == nil {
		awaited = &awaitedMember{}
		m.awaited[k] = awaited
	}
	if awaited.told || !m.conn.health.quiet(m.conn.cfg.MemberTTL) {
		return
	}
	awaited.told = true
	m.conn.log.Info("member not back yet after the NATS outage: its partitions wait for it",
		zap.String("member", k), zap.Duration("return_wait_ms", m.conn.cfg.ReturnWait))
}

// watchLeaving signals when an instance leaves the membership on its own
// (a graceful stop deletes its key): its partitions are taken at once,
// not at the next tick, also right after an outage (it is not awaited).
// Ticks still find the ones that expired: an expiry leaves no mark to
// watch (the bucket keeps no limit markers), so one is never taken for a
// member that left.
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
			if e.Key() == keyPart(m.conn.cfg.Instance) && ctx.Err() == nil {
				m.conn.log.Warn("this instance was taken for gone: its connection to NATS was closed for a while; it takes its share back with its next heartbeat")
			}
			m.forget(strings.TrimPrefix(e.Key(), drainingPrefix))
			select {
			case left <- struct{}{}:
			default:
			}
		}
	}()
	return left
}

// expel deletes the heartbeat of member, whose connection to NATS closed
// (presence), if it has not beaten since rev: every instance drops it from
// the spread at once (watchLeaving), and a lock it held is a gone
// instance's. It returns the partitions member had, by the spread before,
// and whether it was expelled here (not by another instance first, nor
// back since).
func (m *membership) expel(ctx context.Context, member string, rev uint64) (parts []int, expelled bool) {
	m.mu.Lock()
	parts = Assign(m.known, member, m.conn.cfg.Partitions)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.conn.cfg.MemberTTL/3)
	defer cancel()
	if err := m.kv.Delete(ctx, member, jsapi.LastRevision(rev)); err != nil {
		return nil, false
	}
	return parts, true
}

// forget drops member from the spread: it left.
func (m *membership) forget(member string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A new slice: the last view returned m.known to its caller.
	m.known = slices.DeleteFunc(slices.Clone(m.known), func(k string) bool { return k == member })
	delete(m.awaited, member)
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

// isMember reports whether instance is live: a member, draining (a
// stopping instance finishing its work), or, until this instance's NATS
// has answered for ReturnWait after an outage, a member of the spread
// before it that is not back yet (view): every heartbeat expired with the
// outage, and one slow to come back may still be at work.
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
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.conn.health.quiet(m.conn.cfg.ReturnWait) && slices.Contains(m.known, keyPart(instance)), nil
}
