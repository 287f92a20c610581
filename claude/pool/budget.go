package pool

import (
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
	return fmt.Sprintf("each bot keeps %d started Claude CLI (up to %d when new conversations come fast, and as many again for each other shape of its new conversations while they come, as guest answers), an idle process of ~%d MB each, within max warm %d%s; when it is full the kept processes wanted least lately end first, and spares start at a lower CPU priority when no request waits",
		spares, max(spares, maxSpares), SpareMB, maxWarm, bound)
}

// room is how many more processes the budget has room for: within Max,
// and within the memory measured (memoryRoom).
func (s *state[P, S]) room() int {
	return min(s.cfg.Max-len(s.idle)-len(s.running)-len(s.claimed)-s.held(), s.memoryRoom())
}

// spareMemoryRoom is how many more spares SpareMemoryMB's cap has room
// for, where it is set.
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

// trim makes the pool fit Max: it takes out the kept processes worth
// least first (memory.go: a conversation's idle process or a spare, by
// how lately it was wanted; a spare first where they are worth the
// same), and returns them to end.
func (s *state[P, S]) trim() []P {
	var evicted []P
	now := time.Now()
	for len(s.idle)+s.held() > s.cfg.Max {
		least := s.keptByWorth(now, true)
		if len(least) == 0 {
			break // only spares not started yet: they are trimmed once started
		}
		s.log.Debug("claude: kept CLI ended: the warm-process budget is full", zap.Bool("spare", least[0].spare != nil), zap.Int("max_warm", s.cfg.Max))
		evicted = append(evicted, s.drop(least[0]))
	}
	return evicted
}

// makeRoom ends the kept process worth least when the budget is full and
// a set lacks a spare worth more than twice as much: a bot whose new
// conversations come often keeps its spare however many conversations
// are warm, and a panel's spares give way to a bot's. One at a time, and
// only when that leaves room for the start.
func (s *state[P, S]) makeRoom(now time.Time) []P {
	if s.room() != 0 {
		return nil
	}
	wanted := 0.0
	for _, set := range s.sets {
		if set.have() < set.target && !now.Before(set.retryAt) {
			wanted = max(wanted, s.spareWorth(set, set.have(), now))
		}
	}
	least := s.keptByWorth(now, false)
	if len(least) == 0 || 2*least[0].worth >= wanted {
		return nil
	}
	s.log.Debug("claude: kept CLI ended for a spare worth more: the warm-process budget is full", zap.Bool("spare", least[0].spare != nil), zap.Int("max_warm", s.cfg.Max))
	return []P{s.drop(least[0])}
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
