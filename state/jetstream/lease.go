package jetstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// leases keeps the poller leases in brainbot_leases, one per bot, and
// which bots this instance polls.
type leases struct {
	conn    *conn
	kv      jsapi.KeyValue
	members *membership

	mu     sync.Mutex
	polled map[string]bool // bots whose lease this instance holds
}

// Lease runs poll while this instance holds bot's poller lease, and waits
// for the lease whenever another instance holds it, until ctx ends or poll
// fails (its error is returned). The lease is a key in a bucket with a
// TTL: created when absent, refreshed by a revision-checked update every
// third of the TTL. poll's context ends as soon as a refresh fails (the
// lease may be someone else's by then); after poll returns the lease is
// released, so a graceful stop hands over at once. A dead instance's lease
// expires within the TTL.
//
// The leases spread over the instances as the partitions do (spread over
// the members and the bots leased): a free lease is taken at once by
// the instance it is given to, by the others a lease TTL later, and a
// holder hands it to that instance once that one asks for it (a mark
// beside the lease while it waits: an instance not running the bot is
// never handed its lease).
func (l *leases) Lease(ctx context.Context, bot string, poll func(ctx context.Context) error) error {
	key := keyPart(bot)
	log := l.conn.log.With(zap.String("bot", bot))
	retry := min(time.Second, l.conn.cfg.LeaseTTL/3)
	for ctx.Err() == nil {
		mine := l.waitTurn(ctx, key)
		rev, err := l.kv.Create(ctx, key, []byte(l.conn.cfg.Instance))
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, jsapi.ErrKeyExists):
				if mine {
					l.ask(ctx, key)
				}
				l.awaitRelease(ctx, key, l.conn.cfg.LeaseTTL)
				continue
			case unavailable(err):
				l.conn.health.failed("take the poller lease", err) // logged once an outage
			default:
				log.Warn("could not take the poller lease", zap.Error(err))
			}
			sleep(ctx, retry)
			continue
		}
		log.Info("poller lease taken", zap.String("instance", l.conn.cfg.Instance))
		l.setPolled(bot, true)
		err = l.holdLease(ctx, key, rev, poll, log)
		l.setPolled(bot, false)
		if err != nil {
			return err
		}
	}
	return nil
}

// holdLease runs poll and refreshes the lease until either ends. It
// returns poll's error, unless the lease was lost or ctx ended first.
func (l *leases) holdLease(ctx context.Context, key string, rev uint64, poll func(context.Context) error, log *zap.Logger) error {
	pollCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var pollErr error
	go func() {
		defer close(done)
		pollErr = poll(pollCtx)
	}()
	tick := time.NewTicker(l.conn.cfg.LeaseTTL / 3)
	defer tick.Stop()
	lost := false
	for ticks := 1; !lost; ticks++ {
		select {
		case <-done:
			stop()
			l.release(key, rev)
			return pollErr
		case <-ctx.Done():
			lost = true
		case <-tick.C:
			rctx, cancel := context.WithTimeout(ctx, l.conn.cfg.LeaseTTL/3)
			next, err := l.kv.Update(rctx, key, []byte(l.conn.cfg.Instance), rev)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("poller lease lost: polling stops", zap.String("cause", leaseLossCause(err)), zap.Error(err))
				}
				lost = true
				break
			}
			rev = next
			if ticks%3 == 0 && l.handOver(ctx, key, log) {
				lost = true
			}
		}
	}
	stop()
	<-done
	l.release(key, rev)
	return nil
}

// askPrefix marks, in brainbot_leases, the instance a held lease is given
// to and that waits for it: its holder hands it over.
const askPrefix = "ask."

// waitTurn waits, before a free lease is taken, until it is this
// instance's turn: at once if the lease is given to it (or that cannot be
// told; mine is then true), a lease TTL later if not, so that the instance
// it is given to takes it when that one is alive and any instance does
// when not. Right after an outage the members not back yet keep their
// bots for that TTL too (membership.view). Meanwhile it looks again each
// rebalance tick: a lease given to an instance that released it as it
// stopped, before it left the membership, is given to another a moment
// later, which takes it then (it waited a whole lease TTL). A lease held
// by another is not waited for here but watched (awaitRelease): dropped,
// when its holder is found gone (dropHeldBy), it is taken at once.
func (l *leases) waitTurn(ctx context.Context, key string) (mine bool) {
	turn := time.Now().Add(l.conn.cfg.LeaseTTL)
	for {
		to, ok := l.givenTo(ctx, key)
		switch {
		case !ok || to == keyPart(l.conn.cfg.Instance):
			return true
		case l.held(ctx, key), !time.Now().Before(turn):
			return false
		}
		sleep(ctx, min(l.conn.cfg.MemberTTL/5, time.Until(turn)))
		if ctx.Err() != nil {
			return false
		}
	}
}

// held reports whether the lease at key is held (or that cannot be told).
func (l *leases) held(ctx context.Context, key string) bool {
	ctx, cancel := context.WithTimeout(ctx, l.conn.cfg.LeaseTTL/3)
	defer cancel()
	_, err := l.kv.Get(ctx, key)
	return !errors.Is(err, jsapi.ErrKeyNotFound)
}

// ask marks that this instance, which the lease at key is given to,
// waits for it (the mark lasts a lease TTL; the wait renews it).
func (l *leases) ask(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(ctx, l.conn.cfg.LeaseTTL/3)
	defer cancel()
	_, _ = l.kv.Put(ctx, askPrefix+key, []byte(keyPart(l.conn.cfg.Instance))) // unmarked: the lease stays where it is
}

// handOver reports whether this instance, holding the lease at key,
// hands it over: it is given to another member, which asks for it, and
// NATS answered for a member TTL (the members are all listed).
func (l *leases) handOver(ctx context.Context, key string, log *zap.Logger) bool {
	if !l.conn.health.quiet(l.conn.cfg.MemberTTL) {
		return false
	}
	to, ok := l.givenTo(ctx, key)
	if !ok || to == keyPart(l.conn.cfg.Instance) {
		return false
	}
	actx, cancel := context.WithTimeout(ctx, l.conn.cfg.LeaseTTL/3)
	defer cancel()
	asked, err := l.kv.Get(actx, askPrefix+key)
	if err != nil || string(asked.Value()) != to {
		return false
	}
	log.Info("poller lease handed over to spread the bots", zap.String("instance", l.conn.cfg.Instance), zap.String("to", to))
	return true
}

// givenTo is the member the lease at key is given to, spread like the
// partitions over the members (this instance among them) and the bots
// leased; ok is false when they could not be listed.
func (l *leases) givenTo(ctx context.Context, key string) (to string, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, l.conn.cfg.LeaseTTL/3)
	defer cancel()
	members, err := l.members.view(ctx)
	if err != nil {
		return "", false
	}
	keys, err := l.kv.Keys(ctx)
	if err != nil && !errors.Is(err, jsapi.ErrNoKeysFound) {
		return "", false
	}
	// A bot asked for counts while its lease is released and not yet
	// taken again, so that the asker sees the same bots as before.
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, askPrefix)
	}
	keys = append(keys, key)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	return spread(members, keyPart(l.conn.cfg.Instance), keys)[slices.Index(keys, key)], true
}

// awaitRelease waits until the lease at key is released (a holder that
// stops deletes it: the next poller starts at once) or has expired, for
// at most ttl. A dead holder's lease ends without a word, ttl after its
// last refresh: that moment is waited for, not a whole ttl from now, so a
// killed instance's bots are polled again a lease TTL after it last
// refreshed, not up to twice that.
func (l *leases) awaitRelease(ctx context.Context, key string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	w, err := l.kv.Watch(ctx, key, jsapi.UpdatesOnly())
	if err != nil {
		sleep(ctx, time.Second)
		return
	}
	defer w.Stop()
	// Released between the Create that failed and the watch: at once.
	e, err := l.kv.Get(ctx, key)
	if errors.Is(err, jsapi.ErrKeyNotFound) {
		return
	}
	expired := time.NewTimer(ttl)
	defer expired.Stop()
	if err == nil {
		expired.Reset(untilExpiry(e, ttl))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-expired.C:
			return
		case e, ok := <-w.Updates():
			if !ok || e != nil && e.Operation() != jsapi.KeyValuePut {
				return
			}
			if e != nil { // refreshed: its holder lives
				expired.Reset(untilExpiry(e, ttl))
			}
		}
	}
}

// expiryCheck is how long a poller waits at least before trying a lease
// again that should have expired: the server removes expired keys on its
// own timer, and the clocks of two machines differ a little.
const expiryCheck = 250 * time.Millisecond

// untilExpiry is how long until the server expires lease entry e, by its
// time of writing.
func untilExpiry(e jsapi.KeyValueEntry, ttl time.Duration) time.Duration {
	return max(expiryCheck, time.Until(e.Created().Add(ttl)))
}

// dropHeldBy deletes the poller leases member holds: its connection to
// NATS closed (presence), so it polls no more, and the instance each lease
// is given to takes it at once rather than a lease TTL after its last
// refresh. A lease refreshed since it was read is kept.
func (l *leases) dropHeldBy(ctx context.Context, member string) {
	keys, err := l.kv.Keys(ctx)
	if err != nil {
		return // the leases expire by their TTL
	}
	for _, k := range keys {
		if strings.HasPrefix(k, askPrefix) {
			continue
		}
		e, err := l.kv.Get(ctx, k)
		if err != nil || keyPart(string(e.Value())) != member {
			continue
		}
		if l.kv.Delete(ctx, k, jsapi.LastRevision(e.Revision())) == nil {
			l.conn.log.Info("poller lease of a gone member dropped", zap.String("bot", k), zap.String("member", member))
		}
	}
}

// release deletes the lease if it is still ours at rev.
func (l *leases) release(key string, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.kv.Delete(ctx, key, jsapi.LastRevision(rev)) // gone or someone else's: nothing to do
}

func (l *leases) setPolled(bot string, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.polled[bot] = true
	} else {
		delete(l.polled, bot)
	}
}

// list is the bots this instance polls.
func (l *leases) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Keys(l.polled))
}

// Poller is the instance holding bot's poller lease ("": none).
func (l *leases) Poller(ctx context.Context, bot string) (string, error) {
	e, err := l.kv.Get(ctx, keyPart(bot))
	switch {
	case errors.Is(err, jsapi.ErrKeyNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the poller lease of %s: %w", bot, err)
	}
	return string(e.Value()), nil
}

// leaseLossCause says why a lease's refresh failed, for the admin: NATS
// did not answer in time, or the lease is no longer this instance's
// (expired, and taken by another instance or deleted).
func leaseLossCause(err error) string {
	switch {
	case unavailable(err):
		return "nats unavailable"
	case isConflict(err), errors.Is(err, jsapi.ErrKeyNotFound), errors.Is(err, jsapi.ErrKeyDeleted):
		return "lease expired or taken over"
	}
	return "nats refused the refresh"
}
