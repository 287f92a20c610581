package pool

import (
	"time"

	"go.uber.org/zap"
)

// state is what a Pool holds, guarded by its lock: every method of state
// runs with the lock held, so none starts, waits for or ends a process.
// The processes it takes out it returns, for the Pool to end once it has
// unlocked.
type state[P Proc, S any] struct {
	cfg  *Config[P, S]
	log  *zap.Logger
	wake func() // makes tend look soon; it does not block

	// idle holds the conversations' processes between their requests,
	// running those serving one (so that Interrupt can reach them).
	idle    map[string]*warm[P]
	running map[string]P
	// claimed are the processes handed to a request (TakeIdle,
	// TakeSpare) that is not Busy yet: they count as running, or the
	// budget would start a spare in their place meanwhile and end a
	// conversation's process for it when they are Done.
	claimed map[P]bool
	closed  bool

	sets map[setKey]*spareSet[P, S]
	// readied is closed (and replaced) whenever a spare gets ready or
	// goes, for requests waiting for one.
	readied chan struct{}
	stats   Stats // the counters; Ready and Starting are counted when asked
	// active counts the requests running, lastActive is when the last one
	// ended, and cold counts the processes starting for requests
	// (ColdStart): spares wait for them.
	active     int
	lastActive time.Time
	cold       int

	// mem is the box's memory at the last look (its Used less what the
	// processes ended since held, and with the cold starts since), own
	// what each process held of its own when last read, relievedAt when processes were
	// last ended for memory, looks how many looks there were (memory.go).
	mem        Memory
	own        map[P]int64
	relievedAt time.Time
	looks      int
}

// warm is a conversation's idle process.
type warm[P Proc] struct {
	proc     P
	lastUsed time.Time
	// low: started ahead of the conversation's next request below real
	// work (Prewarm); the request raises it.
	low bool
}

func newState[P Proc, S any](cfg *Config[P, S], wake func()) *state[P, S] {
	return &state[P, S]{cfg: cfg, log: cfg.Log, wake: wake, idle: map[string]*warm[P]{}, running: map[string]P{}, claimed: map[P]bool{},
		sets: map[setKey]*spareSet[P, S]{}, readied: make(chan struct{})}
}

// take removes and returns conversation key's idle process, if any.
func (s *state[P, S]) take(key string) *warm[P] {
	w := s.idle[key]
	delete(s.idle, key)
	return w
}

// has reports whether conversation key has a process, running or idle.
func (s *state[P, S]) has(key string) bool {
	_, running := s.running[key]
	return s.idle[key] != nil || running
}

// idleSince takes out the processes unused since t (last used at t or
// before).
func (s *state[P, S]) idleSince(t time.Time) []P {
	var old []P
	for key, w := range s.idle {
		if !w.lastUsed.After(t) {
			old = append(old, w.proc)
			delete(s.idle, key)
		}
	}
	return old
}

// nextIdleEnd is when the first idle process is due to end, or an Idle
// from now when none is idle.
func (s *state[P, S]) nextIdleEnd(now time.Time) time.Time {
	due := now.Add(s.cfg.Idle)
	for _, w := range s.idle {
		if end := w.lastUsed.Add(s.cfg.Idle); end.Before(due) {
			due = end
		}
	}
	return due
}

// endEverything takes out every idle process and spare, and forgets the
// sets.
func (s *state[P, S]) endEverything() []P {
	var ended []P
	for _, w := range s.idle {
		ended = append(ended, w.proc)
	}
	s.idle = map[string]*warm[P]{}
	for _, set := range s.sets {
		ended = append(ended, s.dropSet(set)...)
	}
	return ended
}

// announce tells requests waiting for a spare that one got ready or went.
func (s *state[P, S]) announce() {
	close(s.readied)
	s.readied = make(chan struct{})
}
