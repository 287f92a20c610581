package pool

import (
	"cmp"
	"context"
	"time"
)

// TakeSpare takes a ready spare for a new conversation of fingerprint,
// waiting for one still starting as long as that is worth it (while it
// waits, the spares it waits for are raised to real work's priority);
// false when there is none (a miss, counted) or ctx ended the wait.
func (p *Pool[P, S]) TakeSpare(ctx context.Context, fingerprint string) (proc P, ok bool) {
	if !p.SparesOn() {
		return proc, false
	}
	var deadline <-chan time.Time
	for {
		p.mu.Lock()
		t := p.s.takeSpare(fingerprint)
		p.mu.Unlock()
		for _, raised := range t.raise {
			p.raise(raised)
		}
		if t.found {
			return t.proc, true
		}
		if t.wait == nil {
			break
		}
		if deadline == nil {
			timer := time.NewTimer(t.worth)
			defer timer.Stop()
			deadline = timer.C
		}
		select {
		case <-t.wait:
			continue
		case <-deadline:
		case <-ctx.Done():
			return proc, false
		}
		break
	}
	p.mu.Lock()
	p.s.missed(fingerprint)
	p.mu.Unlock()
	p.wake()
	return proc, false
}

// take is what takeSpare found: a ready spare, or else a channel closed
// when a spare gets ready or goes (nil: none is starting) and how long
// waiting for one is worth; and the spares to raise back to real work's
// priority (the one taken, those waited for the first time).
type take[P Proc] struct {
	proc  P
	found bool
	wait  <-chan struct{}
	worth time.Duration
	raise []P
}

// takeSpare takes a ready spare of fingerprint for a new conversation.
// When none is ready but one is starting, it says how long waiting for
// one is worth (worthWaiting).
func (s *state[P, S]) takeSpare(fingerprint string) take[P] {
	now := time.Now()
	var t take[P]
	for _, set := range s.sets {
		if set.spec.Fingerprint != fingerprint {
			continue
		}
		for _, sp := range set.spares {
			switch {
			case sp.ready && !isDone(sp.proc.Exited()):
				s.removeSpare(sp)
				s.claimed[sp.proc] = true
				set.lastTaken = now
				s.stats.Taken++
				s.wake() // its replacement
				// Raised again if it was while it started: threads it
				// started since may have been low.
				return take[P]{proc: sp.proc, found: true, raise: append(t.raise, sp.proc)}
			case !sp.ready:
				t.worth = max(t.worth, s.worthWaiting(set, now.Sub(sp.started)))
				if !sp.raised {
					sp.raised = true
					t.raise = append(t.raise, sp.proc)
				}
			}
		}
		if set.pending > 0 {
			// Being started, its process not there yet (on a loaded
			// machine a while: spares start below real work): waited
			// for as one just started, raised once it is there.
			t.worth = max(t.worth, s.worthWaiting(set, 0))
		}
	}
	if t.worth > 0 {
		t.wait = s.readied
	}
	return t
}

// worthWaiting is how long waiting for a spare of set started age ago
// is worth: until a start as long as the set's last would be over twice.
func (s *state[P, S]) worthWaiting(set *spareSet[P, S], age time.Duration) time.Duration {
	expected := cmp.Or(set.lastStartup, defaultStartup)
	return min(2*expected, s.cfg.SpareStart) - age
}

// missed records a new conversation of fingerprint that found no spare:
// the sets of that shape that served one before (they had a spare, but it
// was taken and not yet replaced) grow by one, up to their most.
func (s *state[P, S]) missed(fingerprint string) {
	s.stats.Missed++
	for _, set := range s.sets {
		if set.spec.Fingerprint == fingerprint && !set.lastTaken.IsZero() && set.target < s.maxTarget(set) {
			set.target++
		}
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
