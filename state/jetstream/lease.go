package jetstream

import (
	"context"
	"errors"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Lease runs poll while this instance holds bot's poller lease, and waits
// for the lease whenever another instance holds it, until ctx ends or poll
// fails (its error is returned). The lease is a key in a bucket with a
// TTL: created when absent, refreshed by a revision-checked update every
// third of the TTL. poll's context ends as soon as a refresh fails (the
// lease may be someone else's by then); after poll returns the lease is
// released, so a graceful stop hands over at once. A dead instance's lease
// expires within the TTL.
func (c *Cluster) Lease(ctx context.Context, bot string, poll func(ctx context.Context) error) error {
	key := keyPart(bot)
	log := c.log.With(zap.String("bot", bot))
	retry := min(time.Second, c.cfg.LeaseTTL/3)
	for ctx.Err() == nil {
		rev, err := c.leases.Create(ctx, key, []byte(c.cfg.Instance))
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, jsapi.ErrKeyExists):
				c.awaitRelease(ctx, key, c.cfg.LeaseTTL)
				continue
			case unavailable(err):
				c.health.failed("take the poller lease", err) // logged once an outage
			default:
				log.Warn("could not take the poller lease", zap.Error(err))
			}
			sleep(ctx, retry)
			continue
		}
		log.Info("poller lease taken", zap.String("instance", c.cfg.Instance))
		c.setPolled(bot, true)
		err = c.holdLease(ctx, key, rev, poll, log)
		c.setPolled(bot, false)
		if err != nil {
			return err
		}
	}
	return nil
}

// holdLease runs poll and refreshes the lease until either ends. It
// returns poll's error, unless the lease was lost or ctx ended first.
func (c *Cluster) holdLease(ctx context.Context, key string, rev uint64, poll func(context.Context) error, log *zap.Logger) error {
	pollCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var pollErr error
	go func() {
		defer close(done)
		pollErr = poll(pollCtx)
	}()
	tick := time.NewTicker(c.cfg.LeaseTTL / 3)
	defer tick.Stop()
	lost := false
	for !lost {
		select {
		case <-done:
			stop()
			c.release(key, rev)
			return pollErr
		case <-ctx.Done():
			lost = true
		case <-tick.C:
			rctx, cancel := context.WithTimeout(ctx, c.cfg.LeaseTTL/3)
			next, err := c.leases.Update(rctx, key, []byte(c.cfg.Instance), rev)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("poller lease lost: polling stops", zap.Error(err))
				}
				lost = true
				break
			}
			rev = next
		}
	}
	stop()
	<-done
	c.release(key, rev)
	return nil
}

// awaitRelease waits until the lease at key is released (a holder that
// stops deletes it: the next poller starts at once) or has expired, for
// at most ttl. A dead holder's lease ends without a word, ttl after its
// last refresh: that moment is waited for, not a whole ttl from now, so a
// killed instance's bots are polled again a lease TTL after it last
// refreshed, not up to twice that.
func (c *Cluster) awaitRelease(ctx context.Context, key string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	w, err := c.leases.Watch(ctx, key, jsapi.UpdatesOnly())
	if err != nil {
		sleep(ctx, time.Second)
		return
	}
	defer w.Stop()
	// Released between the Create that failed and the watch: at once.
	e, err := c.leases.Get(ctx, key)
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

// release deletes the lease if it is still ours at rev.
func (c *Cluster) release(key string, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.leases.Delete(ctx, key, jsapi.LastRevision(rev)) // gone or someone else's: nothing to do
}

func (c *Cluster) setPolled(bot string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.polled[bot] = true
	} else {
		delete(c.polled, bot)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
