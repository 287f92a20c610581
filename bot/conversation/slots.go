package conversation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// slots hands out the Claude slots (BRAINBOT_MAX_CLAUDE) fairly across
// bots: requests wait in a line per bot, and a freed slot goes to the next
// bot in turn (round robin), so one busy bot cannot starve the others.
// Within a bot's line the cheapest message goes first, and otherwise the
// oldest: a conversation whose process is warm runs its turn in a tenth
// of a cold start's time, so it goes before the cold messages that came
// less than coldHandicap before it, and never before an older one (issue
// 48: under saturation every waiting message's time is lowest that way,
// and no message waits more than coldHandicap behind later ones). A new
// conversation whose bot has a spare of its shape ready is as cheap (the
// spare's start is done), but a spare serves one: only as many waiting
// new conversations count as cheap as the bot had spares ready when each
// came. Age is when the message reached brainbot, not this instance (a
// message redelivered from an instance that died waited there already,
// and must not wait again behind everything that came here meanwhile).
// A conversation waits with one message at a time, so this keeps each
// conversation's order.
// Waiting is bounded per bot, in length and in time, and per guest
// caller: a conversation waits with one request at a time, and so may
// the caller of guest requests, however many chats they summon the bot
// from (each its own conversation), so one person cannot fill the line
// everyone else waits in.
type slots struct {
	// maxWaiting is how many requests of one bot may wait; maxWait how
	// long one may. handicap is how long a cold request may be passed by
	// warm ones: coldHandicap, or a quarter of maxWait where that is less,
	// so that being passed never costs it most of its wait.
	maxWaiting int
	maxWait    time.Duration
	handicap   time.Duration

	// running and waiting follow how many requests hold a slot and wait.
	running, waitingGauge gauge

	mu    sync.Mutex
	free  int
	lines map[string][]*waiter
	turns []string // bots with a non-empty line, in the order they are served
}

// gauge is the part of a Prometheus gauge slots moves.
type gauge interface {
	Inc()
	Dec()
}

type waiter struct {
	granted chan struct{} // closed when the slot is handed over
	caller  int64         // of a guest request; 0 for any other
	// place orders the bot's line: when its message first reached
	// brainbot, handicapped when it is cold.
	place time.Time
	// onSpare: a new conversation placed as cheap for a spare it is to
	// take.
	onSpare bool
}

// coldHandicap is how much later than a cold request a warm one may come
// and still go first: a few cold starts on a small server under load
// (1.5 to 5 s each, issue 48), so a burst of warm turns passes a cold
// one, but a steady stream of them cannot hold it back for long.
const coldHandicap = 10 * time.Second

// errNoSlot says a request could not get a Claude slot: its bot's line is
// full or it waited too long.
var errNoSlot = errors.New("no Claude slot: too many requests waiting")

func newSlots(n, maxWaiting int, maxWait time.Duration, running, waiting gauge) *slots {
	return &slots{free: n, maxWaiting: maxWaiting, maxWait: maxWait, handicap: min(coldHandicap, maxWait/4),
		lines: map[string][]*waiter{}, running: running, waitingGauge: waiting}
}

// errCallerWaiting says a guest request could not wait for a slot: its
// caller has one waiting already.
var errCallerWaiting = fmt.Errorf("%w: the caller has a guest request waiting already", errNoSlot)

// cost is what starting a request's Claude turn costs, for its place in
// its bot's line.
type cost struct {
	// warm: its conversation has its process.
	warm bool
	// spares: a new conversation of its bot's own shape, and how many
	// spares of that shape the bot has ready (0: none, or not new).
	spares int
}

// acquire waits for a slot for bot; caller names who summoned the bot for
// a guest request (0 for any other), since is when the message first
// reached brainbot and c what its turn costs to start (its place in the
// bot's line). It returns errNoSlot when the bot's line is
// full, the caller has a request in it already, or the wait is over, and
// stopped's error when stop is closed first. The caller must call release
// once it has the slot.
func (s *slots) acquire(ctx context.Context, bot string, caller int64, since time.Time, c cost, stop <-chan struct{}) error {
	s.mu.Lock()
	if s.free > 0 && len(s.turns) == 0 {
		s.free--
		s.mu.Unlock()
		s.running.Inc()
		return nil
	}
	if len(s.lines[bot]) >= s.maxWaiting {
		s.mu.Unlock()
		return errNoSlot
	}
	if caller != 0 && slices.ContainsFunc(s.lines[bot], func(w *waiter) bool { return w.caller == caller }) {
		s.mu.Unlock()
		return errCallerWaiting
	}
	w := &waiter{granted: make(chan struct{}), caller: caller, place: since}
	// A spare serves one new conversation: those waiting that count on
	// one already leave fewer to count on.
	w.onSpare = !c.warm && c.spares > s.onSpares(bot)
	if !c.warm && !w.onSpare {
		w.place = since.Add(s.handicap)
	}
	if len(s.lines[bot]) == 0 {
		s.turns = append(s.turns, bot)
	}
	s.lines[bot] = enqueue(s.lines[bot], w)
	s.mu.Unlock()
	s.waitingGauge.Inc()
	defer s.waitingGauge.Dec()

	timeout := time.NewTimer(s.maxWait)
	defer timeout.Stop()
	var err error
	select {
	case <-w.granted:
		s.running.Inc()
		return nil
	case <-timeout.C:
		err = errNoSlot
	case <-stop:
		err = errStopping
	case <-ctx.Done():
		err = ctx.Err()
	}
	if !s.leave(bot, w) {
		// Granted while giving up: hand the slot on.
		s.running.Inc()
		s.release()
	}
	return err
}

// onSpares is how many of bot's waiters count on a spare.
func (s *slots) onSpares(bot string) int {
	n := 0
	for _, w := range s.lines[bot] {
		if w.onSpare {
			n++
		}
	}
	return n
}

// enqueue puts w into line behind every waiter placed as early as it or
// earlier.
func enqueue(line []*waiter, w *waiter) []*waiter {
	i := slices.IndexFunc(line, func(x *waiter) bool { return x.place.After(w.place) })
	if i < 0 {
		return append(line, w)
	}
	return slices.Insert(line, i, w)
}

// errStopping: the manager is shutting down; the message stays journaled.
var errStopping = errors.New("shutting down")

// leave takes w out of bot's line; false means it was granted a slot
// already.
func (s *slots) leave(bot string, w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	line := s.lines[bot]
	for i, x := range line {
		if x == w {
			s.lines[bot] = append(line[:i:i], line[i+1:]...)
			if len(s.lines[bot]) == 0 {
				s.dropTurn(bot)
			}
			return true
		}
	}
	return false
}

// waiting is how many requests of bot wait for a slot.
func (s *slots) waiting(bot string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines[bot])
}

// release frees a slot: the bot whose turn it is gets it, then goes to
// the back of the round.
func (s *slots) release() {
	s.running.Dec()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turns) == 0 {
		s.free++
		return
	}
	bot := s.turns[0]
	line := s.lines[bot]
	w := line[0]
	s.lines[bot] = line[1:]
	s.turns = s.turns[1:]
	if len(s.lines[bot]) > 0 {
		s.turns = append(s.turns, bot)
	} else {
		delete(s.lines, bot)
	}
	close(w.granted)
}

func (s *slots) dropTurn(bot string) {
	delete(s.lines, bot)
	for i, b := range s.turns {
		if b == bot {
			s.turns = append(s.turns[:i:i], s.turns[i+1:]...)
			return
		}
	}
}
