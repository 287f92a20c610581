package pool

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// The budget: what the pool has room for, and what it ends first when it
// has none. Everything that decides either is in this file, so that
// another budget (one of memory measured from the processes) replaces it
// here alone.

// SpareMB is about what one spare holds: an idle CLI's resident memory
// (163 to 171 MB measured by BenchmarkNewConversation on 2.1.328, and a
// little more).
const SpareMB = 175

// SparesIn is how many spares memoryMB of memory holds.
func SparesIn(memoryMB int) int { return memoryMB / SpareMB }

// spareCost is how an admin reads what spares cost, at start-up.
func spareCost(spares, maxSpares, maxWarm, memoryMB int) string {
	bound := ""
	if memoryMB > 0 {
		bound = fmt.Sprintf(" and %d MB of memory (%d spares)", memoryMB, SparesIn(memoryMB))
	}
	return fmt.Sprintf("each bot keeps %d started Claude CLI (up to %d when new conversations come fast, and as many again for each other shape of its new conversations while they come, as guest answers), an idle process of ~%d MB each, within max warm %d%s; spares are ended first when it is full, and start at a lower CPU priority when no request waits",
		spares, max(spares, maxSpares), SpareMB, maxWarm, bound)
}

// room is how many more processes the budget has room for: within Max,
// and within the memory measured (memoryRoom).
func (s *state[P, S]) room() int {
	return min(s.cfg.Max-len(s.idle)-len(s.running)-s.held(), s.memoryRoom())
}

// spareMemoryRoom is how many more spares SpareMemoryMB has room for.
func (s *state[P, S]) spareMemoryRoom() int {
	if s.cfg.SpareMemoryMB <= 0 {
		return s.cfg.Max
	}
	return SparesIn(s.cfg.SpareMemoryMB) - s.held()
}

// roomForWarm reports whether conversation key may get a process of its
// own ahead of its message, without ending another conversation's (spares
// may go).
func (s *state[P, S]) roomForWarm(key string) bool {
	return !s.closed && !s.has(key) && len(s.idle) < s.cfg.Max && s.memoryRoom() > 0
}

// trim makes the pool fit Max: it takes out spares, then the least
// recently used idle processes, and returns them to end.
func (s *state[P, S]) trim() []P {
	var evicted []P
	for len(s.idle)+s.held() > s.cfg.Max {
		sp := s.toEvict(-1)
		if sp == nil {
			break // only spares still being started: they are trimmed once started
		}
		s.log.Debug("claude: spare ended: the warm-process budget is full", zap.String("spares", sp.set.name), zap.Int("max_warm", s.cfg.Max))
		s.removeSpare(sp)
		evicted = append(evicted, sp.proc)
	}
	for len(s.idle) > s.cfg.Max {
		oldest := ""
		for k, w := range s.idle {
			if oldest == "" || w.lastUsed.Before(s.idle[oldest].lastUsed) {
				oldest = k
			}
		}
		s.log.Debug("claude: warm process evicted: the pool is full", zap.Int("max_warm", s.cfg.Max))
		evicted = append(evicted, s.idle[oldest].proc)
		delete(s.idle, oldest)
	}
	return evicted
}

// makeRoom ends a spare of a lower ranked set when the budget is full and
// a set ranked above it lacks one: a panel's spares give way to a bot's
// new conversations'. One at a time, and only when that leaves room for
// the start.
func (s *state[P, S]) makeRoom(now time.Time) []P {
	if s.room() != 0 {
		return nil
	}
	needy := -1
	for _, set := range s.sets {
		if set.have() < set.target && !now.Before(set.retryAt) && (needy < 0 || set.rank() < needy) {
			needy = set.rank()
		}
	}
	sp := s.toEvict(needy)
	if needy < 0 || sp == nil {
		return nil
	}
	s.log.Debug("claude: spare ended for a set ranked before it: the warm-process budget is full", zap.String("spares", sp.set.name), zap.Int("max_warm", s.cfg.Max))
	s.removeSpare(sp)
	return []P{sp.proc}
}

// toEvict is the spare to end first when the budget is tight, among the
// sets ranked after rank (-1: all): the oldest of the lowest ranked set
// that has the most.
func (s *state[P, S]) toEvict(rank int) *spare[P, S] {
	var pick *spareSet[P, S]
	for _, set := range s.sets {
		if len(set.spares) > 0 && set.rank() > rank && (pick == nil || cmp.Or(
			cmp.Compare(pick.rank(), set.rank()), cmp.Compare(len(pick.spares), len(set.spares)),
			strings.Compare(set.name, pick.name), strings.Compare(set.spec.Fingerprint, pick.spec.Fingerprint)) < 0) {
			pick = set
		}
	}
	if pick == nil {
		return nil
	}
	return pick.spares[0]
}

// rank orders the sets for the budget, lowest first: 0 a bot's
// conversations' (named by its id), 1 a bot's set of another shape, 2 a
// set a caller keeps (its name has a "/": a panel's). Spares start in that
// order and are ended in the reverse.
func (set *spareSet[P, S]) rank() int {
	switch {
	case strings.Contains(set.name, "/"):
		return 2
	case set.other:
		return 1
	}
	return 0
}
