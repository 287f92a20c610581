package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/bot/message"
	"brainbot/state"
)

// A conversation is worked on by one instance at a time: the partition's
// pin says who receives its updates, but after an outage longer than the
// ack wait the server hands the updates an instance still holds (and may
// be answering) to the partition's owner again. So the work on an update
// starts under the conversation's lock, a key in brainbot_progress naming
// the instance. It is released when the update is done or handed back. A
// lock whose instance is gone from brainbot_members (killed; a stopping
// instance is there as draining.<name> until it released everything) is
// taken over at once, unless NATS was away lately: then the instance must
// stay away for a member TTL, as a live one coming back from the same
// outage beats again within a second of reconnecting.

// convLocks are the conversation locks this instance holds, counted (an
// album's deliveries each take it).
type convLocks struct {
	mu   sync.Mutex
	held map[string]*convLock
}

type convLock struct {
	n   int
	rev uint64
}

func convLockKey(k message.Key) string {
	return fmt.Sprintf("conv.%s.%d.%d", keyPart(k.Bot), k.Chat, k.Thread)
}

// lockWait bounds how long work on an update waits for its
// conversation's lock before the update is handed back.
const lockWait = time.Minute

// lockConversation takes k's lock for this instance, waiting while a live
// instance holds it. An error wraps state.ErrUnavailable: the update is
// handed back.
func (c *Cluster) lockConversation(ctx context.Context, k message.Key) error {
	key := convLockKey(k)
	c.locks.mu.Lock()
	if l, ok := c.locks.held[key]; ok {
		l.n++
		c.locks.mu.Unlock()
		return nil
	}
	c.locks.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	var absentSince time.Time
	logged := false
	for {
		rev, holder, err := c.tryLock(ctx, key, &absentSince)
		switch {
		case err != nil:
			return fmt.Errorf("lock the conversation: %w", err)
		case rev != 0:
			c.locks.mu.Lock()
			c.locks.held[key] = &convLock{n: 1, rev: rev}
			c.locks.mu.Unlock()
			return nil
		}
		if !logged {
			c.log.Info("conversation busy on another instance; waiting for it", zap.String("conversation", key),
				zap.String("holder", holder))
			logged = true
		}
		sleep(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return state.Unavailable("nats", fmt.Errorf("conversation still busy on %s: %w", holder, state.ErrUnavailable))
		}
	}
}

// tryLock takes the lock if it is free, ours, or its holder has been gone
// long enough; rev 0: holder has it.
func (c *Cluster) tryLock(ctx context.Context, key string, absentSince *time.Time) (rev uint64, holder string, err error) {
	me := []byte(c.cfg.Instance)
	err = c.patiently(ctx, "lock "+key, func(ctx context.Context) error {
		var err error
		if rev, err = c.progress.Create(ctx, key, me); !errors.Is(err, jsapi.ErrKeyExists) {
			return err
		}
		e, err := c.progress.Get(ctx, key)
		if errors.Is(err, jsapi.ErrKeyNotFound) {
			return nil // released meanwhile: next round
		}
		if err != nil {
			return err
		}
		holder = string(e.Value())
		if holder != c.cfg.Instance {
			alive, err := c.isMember(ctx, holder)
			switch {
			case err != nil:
				return err
			case alive:
				*absentSince = time.Time{}
				return nil
			case absentSince.IsZero():
				*absentSince = time.Now()
			}
			if !c.health.quiet(c.cfg.MemberTTL) && time.Since(*absentSince) < c.cfg.MemberTTL {
				return nil
			}
			c.log.Info("conversation lock of a gone instance taken over", zap.String("conversation", key), zap.String("holder", holder))
		}
		rev, err = c.progress.Update(ctx, key, me, e.Revision())
		if isConflict(err) {
			rev, err = 0, nil // someone else was quicker: next round
		}
		return err
	})
	return rev, holder, err
}

// isMember reports whether instance is live: a member, or draining (a
// stopping instance finishing its work).
func (c *Cluster) isMember(ctx context.Context, instance string) (bool, error) {
	for _, key := range []string{keyPart(instance), drainingPrefix + keyPart(instance)} {
		_, err := c.members.Get(ctx, key)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jsapi.ErrKeyNotFound) {
			return false, err
		}
	}
	return false, nil
}

// unlockConversation releases k's lock once its last holder here is done.
func (c *Cluster) unlockConversation(k message.Key) {
	key := convLockKey(k)
	c.locks.mu.Lock()
	l, ok := c.locks.held[key]
	if ok {
		l.n--
	}
	if !ok || l.n > 0 {
		c.locks.mu.Unlock()
		return
	}
	delete(c.locks.held, key)
	c.locks.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.patiently(ctx, "unlock "+key, func(ctx context.Context) error {
		err := c.progress.Delete(ctx, key, jsapi.LastRevision(l.rev))
		if isConflict(err) {
			return nil // taken over meanwhile: not ours to delete
		}
		return err
	})
	if err != nil {
		c.log.Warn("could not release the conversation's lock; another instance takes it over in seconds",
			zap.String("conversation", key), zap.Error(err))
	}
}
