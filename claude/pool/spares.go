package pool

import (
	"cmp"
	"slices"
	"time"

	"go.uber.org/zap"
)

// Stats says how the spares fare, for metrics.
type Stats struct {
	// Ready spares wait for a new conversation; Starting ones are not
	// ready yet. Wanted is how many the sets want now, with what busy
	// ones grew by: the budget may allow fewer.
	Ready, Starting, Wanted int
	// Taken counts new conversations a spare served; Missed those that
	// started a process of their own while spares were on; Failed the
	// spares that failed to start, died or hung before they were taken
	// (each was replaced, after a pause when they keep failing); Started
	// the spares started, a process each.
	Taken, Missed, Failed, Started uint64
}

const (
	// defaultStartup is what a start is taken to need before a set has
	// measured one: about a cold start on a loaded machine.
	defaultStartup = 1500 * time.Millisecond
	// spareQuiet is how long a spare a set lacks waits for a quiet moment
	// before it starts anyway, and spareSettle how long after the last
	// request ended the moment is quiet.
	spareQuiet  = 2 * time.Second
	spareSettle = 300 * time.Millisecond
	// spareCPUPatience is how long a spare a set lacks waits for the CPUs
	// to be free: on a machine kept busy by other work it starts then
	// anyway, at its lower priority.
	spareCPUPatience = 10 * time.Second
	// maxRetryPause bounds the pause before a set whose spares keep
	// failing tries again.
	maxRetryPause = 5 * time.Minute
	// maxShapes bounds the sets kept under one name: a bot's
	// conversations' and those of other shapes of its brain (a guest
	// answer's).
	maxShapes = 3
)

// setKey names a set: a name holds sets of several shapes.
type setKey struct{ name, fingerprint string }

// spareSet is the spares kept for one shape under one name.
type spareSet[P Proc, S any] struct {
	name string
	spec Spec[S]
	// other: a set of another shape than its bot's conversations' (a
	// guest answer's), made by a new conversation of that shape and
	// dropped once its spares sit unused; made is when.
	other bool
	made  time.Time
	// base is the count asked for; target what the set keeps now,
	// between base and max(base, MaxSpares).
	base, target int
	spares       []*spare[P, S] // oldest first
	pending      int            // starts under way
	// lastStartup is how long the set's last spare took to be ready.
	lastStartup time.Duration
	lastTaken   time.Time
	// failures in a row, and when the set may try again after them.
	failures int
	retryAt  time.Time
	// short is when the set last began to lack a spare (zero: it lacks
	// none).
	short time.Time
}

// spare is one started process of a set.
type spare[P Proc, S any] struct {
	proc    P
	set     *spareSet[P, S]
	started time.Time
	ready   bool
	readyAt time.Time
	// gone: out of its set (taken or ended); settled is closed then, which
	// stops its watcher.
	gone    bool
	settled chan struct{}
	// raised: brought back to real work's priority while it started, for
	// a request that waited for it.
	raised bool
}

func (set *spareSet[P, S]) key() setKey { return setKey{set.name, set.spec.Fingerprint} }

// have is how many spares set has or is starting.
func (set *spareSet[P, S]) have() int { return len(set.spares) + set.pending }

// held is how many spares count against the budget: started or being
// started.
func (s *state[P, S]) held() int {
	n := 0
	for _, set := range s.sets {
		n += set.have()
	}
	return n
}

// starting is how many spares are being started or not ready yet.
func (s *state[P, S]) starting() int {
	n := 0
	for _, set := range s.sets {
		n += set.pending
		for _, sp := range set.spares {
			if !sp.ready {
				n++
			}
		}
	}
	return n
}

// named is the sets kept under name.
func (s *state[P, S]) named(name string) []*spareSet[P, S] {
	var sets []*spareSet[P, S]
	for _, set := range s.sets {
		if set.name == name {
			sets = append(sets, set)
		}
	}
	return sets
}

// maxTarget is the most spares set may grow to.
func (s *state[P, S]) maxTarget(set *spareSet[P, S]) int { return max(set.base, s.cfg.MaxSpares) }

// Keep makes name keep n spares of spec (0 drops every set of the name).
// The name's sets of another lineage end (an edited brain); those of the
// same lineage but another shape stay, as sets of another shape (Follow).
func (p *Pool[P, S]) Keep(name string, spec Spec[S], n int) {
	p.mu.Lock()
	var ended []P
	switch {
	case p.s.closed || !p.SparesOn():
	case n <= 0:
		for _, set := range p.s.named(name) {
			ended = append(ended, p.s.dropSet(set)...)
		}
	default:
		ended = p.s.keep(name, spec, n)
	}
	p.mu.Unlock()
	p.endAll(ended)
	p.wake()
}

func (s *state[P, S]) keep(name string, spec Spec[S], n int) []P {
	ended := s.retireEdited(name, spec.Lineage)
	set := s.sets[setKey{name, spec.Fingerprint}]
	if set == nil {
		set = s.addSet(name, spec, n)
	}
	for _, other := range s.named(name) {
		other.other = other != set
	}
	set.base = n
	set.target = min(max(set.target, n), s.maxTarget(set))
	return ended
}

// Follow lets name's sets follow a request of one of the bot's
// conversations: fresh says it is a new conversation whose session the
// caller lets a spare name. A request of another lineage than the sets'
// replaces them (an edited brain) with a set of its shape and their count;
// a new conversation of another shape of the same lineage (a guest
// answer) gets a set of its own beside them, of n spares, that goes once
// its spares sit unused; the bot's first new conversation makes its set,
// of n.
func (p *Pool[P, S]) Follow(name string, spec Spec[S], n int, fresh bool) {
	p.mu.Lock()
	var ended []P
	if !p.s.closed && p.SparesOn() && p.s.sets[setKey{name, spec.Fingerprint}] == nil {
		ended = p.s.follow(name, spec, n, fresh)
	}
	p.mu.Unlock()
	p.endAll(ended)
	p.wake()
}

func (s *state[P, S]) follow(name string, spec Spec[S], n int, fresh bool) []P {
	sets := s.named(name)
	switch {
	case len(sets) == 0:
		if fresh {
			s.addSet(name, spec, n)
		}
	case !slices.ContainsFunc(sets, func(set *spareSet[P, S]) bool { return set.spec.Lineage == spec.Lineage }):
		base := slices.MaxFunc(sets, func(a, b *spareSet[P, S]) int { return cmp.Compare(a.base, b.base) }).base
		ended := s.retireEdited(name, spec.Lineage)
		s.addSet(name, spec, base)
		return ended
	case fresh:
		ended := s.roomForShape(sets)
		set := s.addSet(name, spec, n)
		set.other = true
		own := slices.MinFunc(sets, func(a, b *spareSet[P, S]) int { return cmp.Compare(a.rank(), b.rank()) })
		s.log.Info("claude: spares kept for another shape of the bot's new conversations, beside its own",
			zap.String("spares", name), zap.Strings("differs", s.cfg.Differs(own.spec.Shape, spec.Shape)), zap.Int("count", n))
		return ended
	}
	return nil
}

// addSet makes a set of n spares.
func (s *state[P, S]) addSet(name string, spec Spec[S], n int) *spareSet[P, S] {
	set := &spareSet[P, S]{name: name, spec: spec, base: n, target: n, made: time.Now()}
	s.sets[set.key()] = set
	return set
}

// retireEdited drops name's sets of another lineage than lineage: their
// brain was edited.
func (s *state[P, S]) retireEdited(name, lineage string) []P {
	var ended []P
	for _, set := range s.named(name) {
		if set.spec.Lineage != lineage {
			s.log.Info("claude: spares replaced: an edited brain (the prompt, model or tools their processes start with changed)",
				zap.String("spares", name), zap.Int("ended", len(set.spares)))
			ended = append(ended, s.dropSet(set)...)
		}
	}
	return ended
}

// roomForShape drops, when a name's sets are maxShapes already, the set
// of another shape whose spares were wanted least recently.
func (s *state[P, S]) roomForShape(sets []*spareSet[P, S]) []P {
	others := slices.DeleteFunc(slices.Clone(sets), func(set *spareSet[P, S]) bool { return !set.other })
	if len(sets) < maxShapes || len(others) == 0 {
		return nil
	}
	return s.dropSet(slices.MinFunc(others, func(a, b *spareSet[P, S]) int { return lastWanted(a).Compare(lastWanted(b)) }))
}

// lastWanted is when set was last made or taken from.
func lastWanted[P Proc, S any](set *spareSet[P, S]) time.Time {
	if set.lastTaken.After(set.made) {
		return set.lastTaken
	}
	return set.made
}

// dropSet forgets set and returns its spares' processes to end.
func (s *state[P, S]) dropSet(set *spareSet[P, S]) []P {
	var ended []P
	for len(set.spares) > 0 {
		sp := set.spares[0]
		s.removeSpare(sp)
		ended = append(ended, sp.proc)
	}
	delete(s.sets, set.key())
	s.announce() // requests waiting for one of its spares look again
	return ended
}

// removeSpare takes sp out of its set.
func (s *state[P, S]) removeSpare(sp *spare[P, S]) {
	sp.set.spares = slices.DeleteFunc(sp.set.spares, func(o *spare[P, S]) bool { return o == sp })
	sp.gone = true
	close(sp.settled)
}

// Ready is how many spares are ready for the new conversations of name's
// own shape (its set not of another shape): how many of its waiting new
// conversations skip a CLI's start.
func (p *Pool[P, S]) Ready(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, set := range p.s.named(name) {
		if set.other {
			continue
		}
		for _, sp := range set.spares {
			if sp.ready {
				n++
			}
		}
	}
	return n
}

// Stats counts the spares now and the counters so far.
func (p *Pool[P, S]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.s.stats
	for _, set := range p.s.sets {
		st.Wanted += set.target
		for _, sp := range set.spares {
			if sp.ready {
				st.Ready++
			} else {
				st.Starting++
			}
		}
	}
	return st
}
