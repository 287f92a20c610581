package jetstream

// The conversations of this instance most recently active, for the
// prewarm after a start (and of the partitions it takes: arrivals.go).

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"brainbot/message"
	"brainbot/state"
)

// ownWait bounds how long RecentSessions waits for this instance to own
// a partition: a starting instance takes its share within seconds.
const ownWait = 30 * time.Second

// RecentSessions lists the current sessions used at since or later of the
// conversations in the partitions this instance owns, the most recently
// used first, at most limit: the ones whose next message comes here, and
// likeliest soon. A starting instance owns none yet: it waits for its
// first partition (ownWait at most), and for the others to settle.
func (r *records) RecentSessions(ctx context.Context, since time.Time, limit int) ([]state.RecentSession, error) {
	owned := r.updates.waitOwned(ctx)
	if len(owned) == 0 {
		return nil, nil
	}
	return r.recentIn(ctx, owned, since, limit)
}

// recentIn lists the current sessions used at since or later of the
// conversations in partitions, the most recently used first, at most
// limit.
func (r *records) recentIn(ctx context.Context, partitions map[int]bool, since time.Time, limit int) ([]state.RecentSession, error) {
	var out []state.RecentSession
	err := scan(ctx, r.kv, "session.>", func(_ string, value []byte) {
		var v sessionValue
		if json.Unmarshal(value, &v) != nil || v.Conversation == nil || v.LastUsed.Before(since) ||
			!partitions[partition(*v.Conversation, r.conn.cfg.Partitions)] {
			return
		}
		out = append(out, state.RecentSession{Conversation: *v.Conversation,
			Session: state.Session{ID: v.ID, Created: v.Created, LastUsed: v.LastUsed}})
	})
	if err != nil {
		return nil, fmt.Errorf("read recent sessions: %w", err)
	}
	slices.SortFunc(out, func(a, b state.RecentSession) int { return cmp.Compare(b.LastUsed.UnixNano(), a.LastUsed.UnixNano()) })
	return out[:min(len(out), limit)], nil
}

// waitOwned waits until this instance owns a partition and its share has
// not changed for a while, and returns the partitions it owns then (none
// after ownWait, or when ctx ends).
func (u *updates) waitOwned(ctx context.Context) map[int]bool {
	const settle = time.Second
	deadline := time.Now().Add(ownWait)
	var last []int
	steady := time.Now()
	for time.Now().Before(deadline) {
		now := u.ownedList()
		slices.Sort(now)
		if !slices.Equal(now, last) {
			last, steady = now, time.Now()
		}
		if len(now) > 0 && time.Since(steady) >= settle {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	owned := map[int]bool{}
	for _, p := range last {
		owned[p] = true
	}
	return owned
}

// partition is the partition of conversation c's updates among n: what
// the stream's subject transform computes (partition(n,1,2,3) over the
// subject's bot, chat and thread tokens, Publish): FNV-1a of the tokens
// joined, modulo n.
func partition(c message.Key, n int) int {
	h := fnv.New32a()
	h.Write([]byte(keyPart(c.Bot) + strconv.FormatInt(c.Chat, 10) + strconv.Itoa(c.Thread)))
	return int(h.Sum32() % uint32(n))
}
