package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/message"
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

// convLocks keeps the conversation locks, in brainbot_progress, and
// counts the ones this instance holds (an album's deliveries each take
// it).
type convLocks struct {
	conn    *conn
	kv      jsapi.KeyValue
	members *membership

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

// lock takes k's lock for this instance, waiting while a live
// instance holds it. An error wraps state.ErrUnavailable: the update is
// handed back.
func (ls *convLocks) lock(ctx context.Context, k message.Key) error {
	key := convLockKey(k)
	ls.mu.Lock()
	if l, ok := ls.held[key]; ok {
		l.n++
		ls.mu.Unlock()
		return nil
	}
	ls.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	logged := false
	for {
		rev, holder, err := ls.tryLock(ctx, key)
		switch {
		case err != nil:
			return fmt.Errorf("lock the conversation: %w", err)
		case rev != 0:
			ls.mu.Lock()
			ls.held[key] = &convLock{n: 1, rev: rev}
			ls.mu.Unlock()
			return nil
		}
		if !logged {
			ls.conn.log.Info("conversation busy on another instance; waiting for it", zap.String("conversation", key),
				zap.String("holder", holder))
			logged = true
		}
		sleep(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return state.Unavailable("nats", fmt.Errorf("conversation still busy on %s: %w", holder, state.ErrUnavailable))
		}
	}
}

// tryLock takes the lock if it is free, ours, or its holder is gone
// (membership.isMember); rev 0: holder has it.
func (ls *convLocks) tryLock(ctx context.Context, key string) (rev uint64, holder string, err error) {
	me := []byte(ls.conn.cfg.Instance)
	err = ls.conn.patiently(ctx, "lock "+key, func(ctx context.Context) error {
		var err error
		if rev, err = ls.kv.Create(ctx, key, me); !errors.Is(err, jsapi.ErrKeyExists) {
			return err
		}
		e, err := ls.kv.Get(ctx, key)
		if errors.Is(err, jsapi.ErrKeyNotFound) {
			return nil // released meanwhile: next round
		}
		if err != nil {
			return err
		}
		holder = string(e.Value())
		if holder != ls.conn.cfg.Instance {
			alive, err := ls.members.isMember(ctx, holder)
			if err != nil || alive {
				return err
			}
			ls.conn.log.Info("conversation lock of a gone instance taken over", zap.String("conversation", key), zap.String("holder", holder))
		}
		rev, err = ls.kv.Update(ctx, key, me, e.Revision())
		if isConflict(err) {
			rev, err = 0, nil // someone else was quicker: next round
		}
		return err
	})
	return rev, holder, err
}

// unlock releases k's lock once its last holder here is done.
func (ls *convLocks) unlock(k message.Key) {
	key := convLockKey(k)
	ls.mu.Lock()
	l, ok := ls.held[key]
	if ok {
		l.n--
	}
	if !ok || l.n > 0 {
		ls.mu.Unlock()
		return
	}
	delete(ls.held, key)
	ls.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := ls.conn.patiently(ctx, "unlock "+key, func(ctx context.Context) error {
		err := ls.kv.Delete(ctx, key, jsapi.LastRevision(l.rev))
		if isConflict(err) {
			return nil // taken over meanwhile: not ours to delete
		}
		return err
	})
	if err != nil {
		// This instance lives, so no other takes the lock over; the
		// client sends the buffered release once it reconnects.
		ls.conn.log.Warn("could not release the conversation's lock in time: NATS gets the release once the client reconnects; until then the conversation's next message waits on any other instance",
			zap.String("conversation", key), zap.Error(err))
	}
}
