package jetstream

// The conversations that come to this instance when it takes partitions
// another one had, for their prewarm (state.Arrivals).

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/state"
)

// arrivals collects the partitions this instance took from others until
// WatchArrivals looks: rebalance adds to it and never waits for it. Its
// zero value is ready.
type arrivals struct {
	mu sync.Mutex
	// started: the instance took its first partitions. That first take is
	// the start's, which the start-up prewarm covers (RecentSessions).
	started bool
	taken   map[int]bool  // since WatchArrivals last looked
	wake    chan struct{} // a signal pending, at most one
}

// took records the partitions rebalance has just started pulling.
func (a *arrivals) took(partitions []int) {
	if len(partitions) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		a.started = true
		return
	}
	if a.taken == nil {
		a.taken = map[int]bool{}
	}
	for _, p := range partitions {
		a.taken[p] = true
	}
	select {
	case a.signal() <- struct{}{}:
	default: // one is pending: it sees these too
	}
}

// next waits for partitions taken and returns them; nil once ctx ended.
func (a *arrivals) next(ctx context.Context) map[int]bool {
	for {
		a.mu.Lock()
		taken, wake := a.taken, a.signal()
		a.taken = nil
		a.mu.Unlock()
		if len(taken) > 0 {
			return taken
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}

// signal is the channel a take wakes next with; a.mu held.
func (a *arrivals) signal() chan struct{} {
	if a.wake == nil {
		a.wake = make(chan struct{}, 1)
	}
	return a.wake
}

// WatchArrivals calls fn, until ctx ends, each time this instance takes
// partitions from another one (it died, stopped, or the partitions were
// spread again), with the current sessions of those partitions'
// conversations used at since() or later, the most recently used first,
// at most limit. It reads them as soon as the partitions are taken, not
// once the spread settled: their next messages come now. The first take
// of a starting instance is no arrival: the start-up prewarm lists those
// (RecentSessions).
func (r *records) WatchArrivals(ctx context.Context, since func() time.Time, limit int, fn func([]state.RecentSession)) {
	for {
		taken := r.updates.arrivals.next(ctx)
		if taken == nil {
			return
		}
		// One taken and released again since is another's now.
		still := map[int]bool{}
		for _, p := range r.updates.ownedList() {
			still[p] = taken[p]
		}
		list, err := r.recentIn(ctx, still, since(), limit)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.conn.log.Warn("no prewarm of the conversations of the partitions taken", zap.Error(err))
		case len(list) > 0:
			fn(list)
		}
	}
}
