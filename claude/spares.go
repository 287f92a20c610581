package claude

// Spares: CLI processes started ahead of new conversations.
//
// A CLI started with --input-format stream-json and no input yet does its
// start-up work anyway: it connects its MCP servers and waits on stdin
// (checked on 2.1.328); a first message written then reaches the model in
// ~90 ms, against ~340 ms and more when the process starts with it. Its
// options, the session id among them, are fixed at the spawn, so a spare
// serves only a new conversation of the very shape it was started for
// (the same fingerprint), and that conversation takes the spare's session
// id. What varies per message travels with the message (sysprompt.Note).
//
// Spares are kept in named sets, each of one shape: the set named after a
// bot (its BotID) is the bot's conversations', kept by Run itself; a
// caller may keep others (KeepSpares), a panel's for example. A bot's new
// conversations of another shape than its set's, but of the same brain (a
// guest answer has no question tool), get a set of their own under the
// bot's name, kept while they come; only a request of another brain (its
// lineage: the shape but for what a kind of request adds) replaces the
// bot's sets. A set keeps its count ready and grows, up to
// WarmConfig.MaxSpares, when new conversations miss it; its spares count
// against WarmConfig.Max and are the first ended when the budget is
// tight, callers' sets' before a bot's, and a bot's set lacking a spare
// ends a caller's spare when the budget has no room for its own (rank).
// One goroutine (tend) starts and retires them; each spare has a watcher
// that marks it ready when its CLI reaches brainbot's tool server, and
// replaces it if it dies first.
//
// A CLI's start costs about half a second of CPU, and the CLI goes on
// with its start-up for a while after it reached the tool server. So
// spares start in quiet moments: while requests run, and for spareSettle
// after the last one ended, a spare a set lacks waits, up to spareQuiet
// (a panel's turns follow one another within that, and are not slowed by
// the spares they took being replaced); and no more start at once than
// the machine has CPUs.
//
// And spares yield to real work: none starts while a request waits for a
// Claude slot (Config.Waiting), however long a set has lacked one, nor
// while a request's CLI is starting, nor while the machine's CPUs are all
// wanted (threads waited for one a fifth of the time lately, cpuGauge):
// while requests of ours run, however long; while other work keeps the
// CPUs busy, up to spareCPUPatience. Spare CLIs run at a lower CPU
// priority (nice +10, reaper.StartLow) until a conversation takes one or
// waits for it to start: it is raised back where the rlimit allows
// (raise). Measured under saturation, spares starting at normal priority
// made the median answer 1.7 to 2.1 times as long (issue 38). Memory
// bounds them too: all spares together hold at most
// WarmConfig.SpareMemoryMB.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/procfs"
	"go.uber.org/zap"

	"brainbot/reaper"
	"brainbot/sysprompt"
)

// ErrNoRoom means the warm-process budget (WarmConfig.Max) has no room
// for another process.
var ErrNoRoom = errors.New("claude: the warm-process budget (max warm) is full")

// SpareStats says how the spares fare, for metrics.
type SpareStats struct {
	// Ready spares wait for a new conversation; Starting ones have not
	// reached the tool server yet. Wanted is how many the sets want now,
	// with what busy ones grew by: the budget may allow fewer.
	Ready, Starting, Wanted int
	// Taken counts new conversations a spare served; Missed those that
	// started a CLI of their own while spares were on; Failed the spares
	// that failed to start, died or hung before they were taken (each was
	// replaced, after a pause when they keep failing); Started the spares
	// started, a CLI each.
	Taken, Missed, Failed, Started uint64
}

const (
	// defaultStartup is what a CLI's start is taken to need before a
	// set has measured one: about a cold start on a loaded machine.
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

// spares is the pool's part that holds the spares, guarded by pool.mu.
type spares struct {
	sets map[setKey]*spareSet
	// spawn starts a CLI for a shape whose session id is set.
	spawn func(shape Request) (*live, error)
	// kick wakes tend; readied is closed (and replaced) whenever a spare
	// gets ready or goes, for requests waiting for one.
	kick    chan struct{}
	readied chan struct{}
	stats   SpareStats // the counters; Ready and Starting are counted when asked
	stopped chan struct{}
	// active counts the requests running (Run), lastActive is when the
	// last one ended, and maxStarting bounds the spares starting at once:
	// the machine's CPUs.
	active      int
	lastActive  time.Time
	maxStarting int
	// waiting is how many requests wait for a Claude slot (Config.Waiting),
	// cpuBusy whether the CPUs were all wanted lately (cpuGauge): spares
	// wait for both to be over. cpuBusy is called with mu held.
	waiting func() int
	cpuBusy func() bool
	// cold counts the CLIs starting for requests (coldStart).
	cold int
}

func newSpares() spares {
	s := spares{sets: map[setKey]*spareSet{}, kick: make(chan struct{}, 1), readied: make(chan struct{}), stopped: make(chan struct{}),
		maxStarting: runtime.NumCPU(), waiting: func() int { return 0 }}
	cpu := newCPUGauge()
	s.cpuBusy = func() bool { return cpu.contended(time.Now()) }
	return s
}

// setKey names a set: a name holds sets of several shapes.
type setKey struct{ name, fingerprint string }

// spareSet is the spares kept for one shape under one name.
type spareSet struct {
	name        string
	shape       Request // what a spare is started with, but its session
	fingerprint string
	// lineage is the shape's brain (Driver.lineage): a set of another
	// lineage under the same name is of an older brain.
	lineage string
	// other: a set of another shape than its bot's conversations' (a
	// guest answer's), made by a new conversation of that shape and
	// dropped once its spares sit unused; made is when.
	other bool
	made  time.Time
	// base is the count asked for; target what the set keeps now,
	// between base and max(base, MaxSpares).
	base, target int
	spares       []*spare // oldest first
	pending      int      // spawns under way
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

// spare is one started CLI of a set.
type spare struct {
	cli     *live
	set     *spareSet
	ready   bool
	readyAt time.Time
	// gone: out of its set (taken or ended); settled is closed then, which
	// stops its watcher.
	gone    bool
	settled chan struct{}
	// raised: brought back to brainbot's CPU priority while it started,
	// for a request that waited for it.
	raised bool
}

// held is how many spares count against the budget: started or being
// started.
func (s *spares) held() int {
	n := 0
	for _, set := range s.sets {
		n += len(set.spares) + set.pending
	}
	return n
}

// starting is how many spares are being started or not ready yet.
func (s *spares) starting() int {
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

func (set *spareSet) key() setKey { return setKey{set.name, set.fingerprint} }

// have is how many spares set has or is starting.
func (set *spareSet) have() int { return len(set.spares) + set.pending }

// rank orders the sets for the budget, lowest first: 0 a bot's
// conversations' (named by its id), 1 a bot's set of another shape, 2 a
// set a caller keeps (its name has a "/": a panel's). Spares start in that
// order and are ended in the reverse.
func (set *spareSet) rank() int {
	switch {
	case strings.Contains(set.name, "/"):
		return 2
	case set.other:
		return 1
	}
	return 0
}

// toEvict is the spare to end first when the budget is tight, among the
// sets ranked after rank (-1: all): the oldest of the lowest ranked set
// that has the most.
func (s *spares) toEvict(rank int) *spare {
	var pick *spareSet
	for _, set := range s.sets {
		if len(set.spares) > 0 && set.rank() > rank && (pick == nil || cmp.Or(
			cmp.Compare(pick.rank(), set.rank()), cmp.Compare(len(pick.spares), len(set.spares)),
			strings.Compare(set.name, pick.name), strings.Compare(set.fingerprint, pick.fingerprint)) < 0) {
			pick = set
		}
	}
	if pick == nil {
		return nil
	}
	return pick.spares[0]
}

// named is the sets kept under name.
func (s *spares) named(name string) []*spareSet {
	var sets []*spareSet
	for _, set := range s.sets {
		if set.name == name {
			sets = append(sets, set)
		}
	}
	return sets
}

// maxTarget is the most spares set may grow to.
func (p *pool) maxTarget(set *spareSet) int { return max(set.base, p.cfg.MaxSpares) }

func (p *pool) sparesOn() bool { return p.cfg.Spares > 0 && p.cfg.Max > 0 }

// startSpares starts tending spares with spawn, when spares are on.
func (p *pool) startSpares(spawn func(shape Request) (*live, error)) {
	p.spares.spawn = spawn
	if !p.sparesOn() {
		close(p.spares.stopped)
		return
	}
	go p.tendLoop()
}

// wake makes tend look at the sets soon.
func (p *pool) wake() {
	select {
	case p.spares.kick <- struct{}{}:
	default:
	}
}

// announce tells requests waiting for a spare that one got ready or
// went. Called with p.mu held.
func (p *pool) announce() {
	close(p.spares.readied)
	p.spares.readied = make(chan struct{})
}

// keepSpares makes name keep n spares of shape (0 drops every set of
// the name). The name's sets of another lineage end (an edited brain);
// those of the same lineage but another shape stay, as sets of another
// shape (followSpares).
func (p *pool) keepSpares(name string, shape Request, fingerprint, lineage string, n int) {
	p.mu.Lock()
	var ended []*live
	switch {
	case p.closed || !p.sparesOn():
	case n <= 0:
		for _, set := range p.spares.named(name) {
			ended = append(ended, p.dropSet(set)...)
		}
	default:
		ended = p.retireEdited(name, lineage)
		set := p.spares.sets[setKey{name, fingerprint}]
		if set == nil {
			set = p.addSet(name, shape, fingerprint, lineage, n)
		}
		for _, other := range p.spares.named(name) {
			other.other = other != set
		}
		set.base = n
		set.target = min(max(set.target, n), p.maxTarget(set))
	}
	p.mu.Unlock()
	p.endAll(ended)
	p.wake()
}

// followSpares lets name's sets follow a request of one of the bot's
// conversations (Run): fresh says it is a new conversation whose session
// the driver names. A request of another lineage than the sets' replaces
// them (an edited brain) with a set of its shape and their count; a new
// conversation of another shape of the same lineage (a guest answer) gets
// a set of its own beside them, of n spares, that goes once its spares sit
// unused; the bot's first new conversation makes its set, of n.
func (p *pool) followSpares(name string, shape Request, fingerprint, lineage string, n int, fresh bool) {
	p.mu.Lock()
	sets := p.spares.named(name)
	var ended []*live
	switch {
	case p.closed || p.spares.sets[setKey{name, fingerprint}] != nil:
	case len(sets) == 0:
		if fresh {
			p.addSet(name, shape, fingerprint, lineage, n)
		}
	case !slices.ContainsFunc(sets, func(set *spareSet) bool { return set.lineage == lineage }):
		base := slices.MaxFunc(sets, func(a, b *spareSet) int { return cmp.Compare(a.base, b.base) }).base
		ended = p.retireEdited(name, lineage)
		p.addSet(name, shape, fingerprint, lineage, base)
	case fresh:
		ended = p.roomForShape(sets)
		set := p.addSet(name, shape, fingerprint, lineage, n)
		set.other = true
		own := slices.MinFunc(sets, func(a, b *spareSet) int { return cmp.Compare(a.rank(), b.rank()) })
		p.log.Info("claude: spares kept for another shape of the bot's new conversations, beside its own",
			zap.String("spares", name), zap.Strings("differs", shapeDiffers(own.shape, shape)), zap.Int("count", n))
	}
	p.mu.Unlock()
	p.endAll(ended)
	p.wake()
}

// addSet makes a set of n spares. Called with p.mu held.
func (p *pool) addSet(name string, shape Request, fingerprint, lineage string, n int) *spareSet {
	set := &spareSet{name: name, shape: shape, fingerprint: fingerprint, lineage: lineage, base: n, target: n, made: time.Now()}
	p.spares.sets[set.key()] = set
	return set
}

// retireEdited drops name's sets of another lineage than lineage: their
// brain was edited. Called with p.mu held.
func (p *pool) retireEdited(name, lineage string) []*live {
	var ended []*live
	for _, set := range p.spares.named(name) {
		if set.lineage != lineage {
			p.log.Info("claude: spares replaced: an edited brain (the prompt, model or tools their processes start with changed)",
				zap.String("spares", name), zap.Int("ended", len(set.spares)))
			ended = append(ended, p.dropSet(set)...)
		}
	}
	return ended
}

// roomForShape drops, when a name's sets are maxShapes already, the set
// of another shape whose spares were wanted least recently. Called with
// p.mu held.
func (p *pool) roomForShape(sets []*spareSet) []*live {
	others := slices.DeleteFunc(slices.Clone(sets), func(set *spareSet) bool { return !set.other })
	if len(sets) < maxShapes || len(others) == 0 {
		return nil
	}
	return p.dropSet(slices.MinFunc(others, func(a, b *spareSet) int { return lastWanted(a).Compare(lastWanted(b)) }))
}

// lastWanted is when set was last made or taken from.
func lastWanted(set *spareSet) time.Time {
	if set.lastTaken.After(set.made) {
		return set.lastTaken
	}
	return set.made
}

// shapeDiffers names the options shapes a and b of one lineage differ in.
func shapeDiffers(a, b Request) []string {
	var differs []string
	if a.Questions != b.Questions {
		differs = append(differs, "questions")
	}
	if a.JSONSchema != b.JSONSchema {
		differs = append(differs, "json_schema")
	}
	return differs
}

// dropSet forgets set and returns its spares' processes to end. Called
// with p.mu held.
func (p *pool) dropSet(set *spareSet) []*live {
	var ended []*live
	for len(set.spares) > 0 {
		sp := set.spares[0]
		p.removeSpare(sp)
		ended = append(ended, sp.cli)
	}
	delete(p.spares.sets, set.key())
	p.announce() // requests waiting for one of its spares look again
	return ended
}

// removeSpare takes sp out of its set. Called with p.mu held.
func (p *pool) removeSpare(sp *spare) {
	sp.set.spares = slices.DeleteFunc(sp.set.spares, func(o *spare) bool { return o == sp })
	sp.gone = true
	close(sp.settled)
}

// take is what takeSpare found: a ready spare, or else a channel closed
// when a spare gets ready or goes (nil: none is starting) and how long
// waiting for one is worth; and the spares to raise back to brainbot's
// CPU priority, as real work now (the one taken, those waited for the
// first time).
type take struct {
	cli   *live
	wait  <-chan struct{}
	worth time.Duration
	raise []*live
}

// takeSpare takes a ready spare of fingerprint for a new conversation.
// When none is ready but one is starting, it says how long waiting for
// one is worth (worthWaiting).
func (p *pool) takeSpare(fingerprint string) take {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var t take
	for _, set := range p.spares.sets {
		if set.fingerprint != fingerprint {
			continue
		}
		for _, sp := range set.spares {
			switch {
			case sp.ready && !isDone(sp.cli.p.Exited()):
				p.removeSpare(sp)
				set.lastTaken = now
				p.spares.stats.Taken++
				sp.cli.spare = true
				p.wake() // its replacement
				// Raised again if it was while it started: threads it
				// started since may have been low.
				return take{cli: sp.cli, raise: append(t.raise, sp.cli)}
			case !sp.ready:
				t.worth = max(t.worth, p.worthWaiting(set, now.Sub(sp.cli.started)))
				if !sp.raised {
					sp.raised = true
					t.raise = append(t.raise, sp.cli)
				}
			}
		}
		if set.pending > 0 {
			// Being started, its process not there yet (on a loaded
			// machine a while: spares start below real work): waited
			// for as one just started, raised once it is there.
			t.worth = max(t.worth, p.worthWaiting(set, 0))
		}
	}
	if t.worth > 0 {
		t.wait = p.spares.readied
	}
	return t
}

// worthWaiting is how long waiting for a spare of set started age ago
// is worth: until a start as long as the set's last would be over twice.
func (p *pool) worthWaiting(set *spareSet, age time.Duration) time.Duration {
	expected := cmp.Or(set.lastStartup, defaultStartup)
	return min(2*expected, p.cfg.SpareStart) - age
}

// missed records a new conversation of fingerprint that found no spare:
// the sets of that shape that served one before (they had a spare, but it
// was taken and not yet replaced) grow by one, up to their most.
func (p *pool) missed(fingerprint string) {
	p.mu.Lock()
	p.spares.stats.Missed++
	for _, set := range p.spares.sets {
		if set.fingerprint == fingerprint && !set.lastTaken.IsZero() && set.target < p.maxTarget(set) {
			set.target++
		}
	}
	p.mu.Unlock()
	p.wake()
}

// spareStats counts the spares now and the counters so far.
func (p *pool) spareStats() SpareStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.spares.stats
	for _, set := range p.spares.sets {
		s.Wanted += set.target
		for _, sp := range set.spares {
			if sp.ready {
				s.Ready++
			} else {
				s.Starting++
			}
		}
	}
	return s
}

// tendLoop tends the spares until close: at once when woken, else on a
// tick that notices hung and idle ones in time.
func (p *pool) tendLoop() {
	defer close(p.spares.stopped)
	tick := time.NewTicker(min(max(min(p.cfg.SpareStart, p.cfg.SpareIdle)/4, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		p.tend()
		select {
		case <-p.stop:
			return
		case <-p.spares.kick:
		case <-tick.C:
		}
	}
}

// tend ends the spares that hung in their start or sat unused for
// SpareIdle, and starts what the sets lack, as far as the budget allows.
func (p *pool) tend() {
	now := time.Now()
	p.mu.Lock()
	var ended []*live
	for _, set := range p.spares.sets {
		for _, sp := range slices.Clone(set.spares) {
			switch {
			case sp.gone: // its set went meanwhile
			case !sp.ready && now.Sub(sp.cli.started) > p.cfg.SpareStart:
				p.log.Warn("claude: a spare CLI did not start in time; replacing it", zap.String("spares", set.name), zap.Duration("spare_start_ms", p.cfg.SpareStart))
				p.removeSpare(sp)
				p.failed(set, now)
				ended = append(ended, sp.cli)
			case sp.ready && now.Sub(sp.readyAt) > p.cfg.SpareIdle:
				p.removeSpare(sp)
				ended = append(ended, sp.cli)
				unused := set.lastTaken.Before(sp.cli.started)
				switch {
				case unused && set.other: // its shape's conversations stopped coming
					p.log.Debug("claude: spares of another shape ended: unused", zap.String("spares", set.name), zap.Duration("spare_idle_ms", p.cfg.SpareIdle))
					ended = append(ended, p.dropSet(set)...)
				case unused && set.target > set.base:
					set.target-- // not needed while it waited: the set shrinks back
				}
			}
		}
	}
	ended = append(ended, p.makeRoom(now)...)
	starts := p.planStarts(now)
	p.mu.Unlock()
	p.endAll(ended)
	for _, set := range starts {
		p.startSpare(set)
	}
}

// planStarts picks the sets to start a spare for, one at a time to the
// first ranked set that has the fewest, while the budget has room, and
// when it is quiet (see the top of this file): while that set waits for a
// quiet moment, none ranked after it starts (it would end their spare for
// its own, makeRoom). Conversations' busy processes count here too: idle
// again, they would end a spare started meanwhile. Called with p.mu held;
// each pick is counted as pending.
func (p *pool) planStarts(now time.Time) []*spareSet {
	room := min(p.room(), p.spares.maxStarting-p.spares.starting(), p.memoryRoom())
	busy := p.spares.active > 0 || now.Sub(p.spares.lastActive) < spareSettle
	asked := false // whether real work wants the machine: asked once
	var starts []*spareSet
	for ; room > 0; room-- {
		var next *spareSet
		for _, set := range p.spares.sets {
			switch {
			case set.have() >= set.target:
				set.short = time.Time{}
				continue
			case set.short.IsZero():
				set.short = now
			}
			if now.Before(set.retryAt) {
				continue
			}
			if next == nil || cmp.Or(cmp.Compare(set.rank(), next.rank()), cmp.Compare(set.have(), next.have()),
				lastWanted(next).Compare(lastWanted(set)),
				strings.Compare(set.name, next.name), strings.Compare(set.fingerprint, next.fingerprint)) < 0 {
				next = set
			}
		}
		if next == nil || busy && now.Sub(next.short) < spareQuiet {
			break
		}
		if !asked {
			if p.yield(now.Sub(next.short), busy) {
				break
			}
			asked = true
		}
		next.pending++
		starts = append(starts, next)
	}
	return starts
}

// yield reports whether real work wants the machine now, for a set that
// has lacked a spare for lacked: a request waits for a Claude slot, or
// for a CPU: a request's CLI is starting, or the CPUs are all wanted.
// ours says whether requests of ours run (or just ended): then they are
// what waits for the CPUs, however long; else the CPUs are busy with
// other work, and a set that lacked a spare for spareCPUPatience starts
// it anyway, below that work. Called with p.mu held.
func (p *pool) yield(lacked time.Duration, ours bool) bool {
	return p.spares.waiting() > 0 || p.spares.cold > 0 || (ours || lacked < spareCPUPatience) && p.spares.cpuBusy()
}

// coldStart counts a CLI started for a request until the returned func
// is called (more calls do nothing): once it has started.
func (p *pool) coldStart() func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spares.cold++
	return sync.OnceFunc(func() {
		p.mu.Lock()
		p.spares.cold--
		p.mu.Unlock()
		p.wake()
	})
}

// memoryRoom is how many more spares SpareMemoryMB has room for.
// Called with p.mu held.
func (p *pool) memoryRoom() int {
	if p.cfg.SpareMemoryMB <= 0 {
		return p.cfg.Max
	}
	return SparesIn(p.cfg.SpareMemoryMB) - p.spares.held()
}

// room is how many more processes the budget has room for. Called with
// p.mu held.
func (p *pool) room() int {
	return p.cfg.Max - len(p.idle) - len(p.running) - p.spares.held()
}

// makeRoom ends a spare of a lower ranked set when the budget is full and
// a set ranked above it lacks one: a panel's spares give way to a bot's
// new conversations'. One at a time, and only when that leaves room for
// the start. Called with p.mu held.
func (p *pool) makeRoom(now time.Time) []*live {
	if p.room() != 0 {
		return nil
	}
	needy := -1
	for _, set := range p.spares.sets {
		if set.have() < set.target && !now.Before(set.retryAt) && (needy < 0 || set.rank() < needy) {
			needy = set.rank()
		}
	}
	sp := p.spares.toEvict(needy)
	if needy < 0 || sp == nil {
		return nil
	}
	p.log.Debug("claude: spare ended for a set ranked before it: the warm-process budget is full", zap.String("spares", sp.set.name), zap.Int("max_warm", p.cfg.Max))
	p.removeSpare(sp)
	return []*live{sp.cli}
}

// startSpare starts one spare for set, with a session of its own.
func (p *pool) startSpare(set *spareSet) {
	shape := set.shape
	shape.SessionID = uuid.NewString()
	cli, err := p.spares.spawn(shape)
	p.mu.Lock()
	set.pending--
	var ended []*live
	switch {
	case err != nil:
		p.log.Warn("claude: a spare CLI could not be started", zap.String("spares", set.name), zap.Error(err))
		p.failed(set, time.Now())
	case p.closed || p.spares.sets[set.key()] != set:
		ended = append(ended, cli) // the set was dropped or replaced meanwhile
	default:
		p.spares.stats.Started++
		sp := &spare{cli: cli, set: set, settled: make(chan struct{})}
		set.spares = append(set.spares, sp)
		p.ending.Add(1)
		go p.watch(sp)
		p.announce() // a request waiting for it raises it
		ended = p.trim()
	}
	p.mu.Unlock()
	p.endAll(ended)
}

// failed counts a spare of set that failed and makes the set pause before
// it tries again, longer each time in a row. Called with p.mu held.
func (p *pool) failed(set *spareSet, now time.Time) {
	p.spares.stats.Failed++
	set.failures++
	set.retryAt = now.Add(min(time.Second<<min(set.failures-1, 16), maxRetryPause))
	p.announce()
}

// watch marks sp ready when its CLI reaches the tool server, and replaces
// it if the CLI exits first or while it waits; it stops when sp leaves
// its set.
func (p *pool) watch(sp *spare) {
	defer p.ending.Done()
	select {
	case <-sp.cli.tools.Reached():
		p.spareReady(sp)
	case <-sp.cli.p.Exited():
		p.spareDied(sp)
		return
	case <-sp.settled:
		return
	}
	select {
	case <-sp.cli.p.Exited():
		p.spareDied(sp)
	case <-sp.settled:
	}
}

func (p *pool) spareReady(sp *spare) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp.gone {
		return
	}
	sp.ready, sp.readyAt = true, time.Now()
	sp.set.lastStartup = sp.readyAt.Sub(sp.cli.started)
	sp.set.failures = 0
	p.announce()
	p.log.Debug("claude: spare ready", zap.String("spares", sp.set.name), zap.Duration("startup_ms", sp.set.lastStartup))
}

func (p *pool) spareDied(sp *spare) {
	p.mu.Lock()
	if sp.gone {
		p.mu.Unlock()
		return
	}
	p.removeSpare(sp)
	p.failed(sp.set, time.Now())
	p.mu.Unlock()
	p.log.Warn("claude: a spare CLI exited before it was used; replacing it", zap.String("spares", sp.set.name),
		zap.Int("exit_code", sp.cli.p.ExitCode()), zap.String("stderr", sp.cli.p.StderrTail()))
	p.endLater(sp.cli)
	p.wake()
}

// requestStarted and requestEnded count the requests running, which
// spares wait for to start.
func (p *pool) requestStarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spares.active++
}

func (p *pool) requestEnded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spares.active--
	p.spares.lastActive = time.Now()
	if p.spares.active == 0 && p.sparesOn() {
		time.AfterFunc(spareSettle, p.wake) // tend looks when it has been quiet
	}
}

// adopt keeps cli as conversation key's idle process, when the budget has
// room for it without ending another conversation's (spares may go).
func (p *pool) adopt(key string, cli *live) bool {
	p.mu.Lock()
	if !p.roomForWarm(key) {
		p.mu.Unlock()
		return false
	}
	cli.lastUsed = time.Now()
	p.idle[key] = cli
	ended := p.trim()
	p.mu.Unlock()
	p.endAll(ended)
	return true
}

// roomForWarm reports whether conversation key may get a process of its
// own ahead of its message. Called with p.mu held.
func (p *pool) roomForWarm(key string) bool {
	return !p.closed && p.idle[key] == nil && p.running[key] == nil && len(p.idle) < p.cfg.Max
}

// KeepSpares keeps n spares of shape ready under the name set: CLI
// processes started ahead of new conversations, each with a session of
// its own. A request that lets the driver name its session (SessionID
// empty, Resume false) and has shape's fingerprint takes one, when one
// is ready, and its session is the spare's; a replacement starts in the
// background. shape is a Request as Run would get it: what the process
// is started with counts (system prompt, model, bot, MCP servers, allowed
// tools, tool timeout, max turns, JSON schema), the rest is ignored. A
// set of another brain under that name (another system prompt, model or
// tools) is replaced, one of the same brain but another shape is kept
// beside it while its spares are taken, and n == 0 drops the name's sets
// (so does DropSpares).
//
// Run keeps the set of each bot's conversations itself, named by the
// bot's id (WarmConfig.Spares of them): made by the first request of a
// conversation that lets the driver name its session, and replaced when
// a request of a conversation comes of another brain (an edited one); a
// new conversation of the same brain but another shape (a guest answer,
// without the question tool) gets a set of its own, of as many spares,
// dropped once they sit unused for SpareIdle (at most maxShapes sets a
// bot).
// A caller keeps sets for other shapes, with names that are no bot id
// (containing "/"), e.g. a panel member's turns. Nothing is kept when
// spares are off (WarmConfig.Spares 0, or Max 0).
func (d *Driver) KeepSpares(set string, shape Request, n int) error {
	if err := d.checkShape(set, shape); err != nil {
		return err
	}
	d.pool.keepSpares(set, shapeOf(shape), d.fingerprint(shape), d.lineage(shape), n)
	return nil
}

func (d *Driver) checkShape(set string, shape Request) error {
	switch {
	case set == "":
		return errors.New("claude: a set of spares needs a name")
	case shape.Resume || shape.SessionID != "":
		return errors.New("claude: spares are for new conversations: the shape names no session")
	}
	return checkRequest(shapeOf(shape))
}

// DropSpares ends the spares of set and forgets it: for a bot whose brain
// is gone, name the set by its id.
func (d *Driver) DropSpares(set string) {
	d.pool.keepSpares(set, Request{}, "", "", 0)
}

// SpareStats says how many spares are ready and how they served so far.
func (d *Driver) SpareStats() SpareStats { return d.pool.spareStats() }

// PrewarmResume starts, in the background, the CLI process that resumes
// req's conversation (req.Resume, req.SessionID and req.Conversation set,
// as for its next Run), so that its next message finds it warm: for the
// most recently active conversations after a restart, whose processes
// ended with the last brainbot, or taken from another instance. It starts
// at the spares' lower CPU priority, raised by the request that takes
// it. The process is the conversation's warm one from now on (WarmConfig:
// idle rules, recycling). It returns
// ErrNoRoom, and starts nothing, when the budget could hold it only by
// ending another conversation's process (spares are ended for it), and
// nil without starting anything when the conversation has its process
// already.
func (d *Driver) PrewarmResume(req Request) error {
	switch err := checkRequest(req); {
	case err != nil:
		return err
	case !req.Resume || req.Conversation == "":
		return errors.New("claude: PrewarmResume is for a resumed conversation (Resume, SessionID and Conversation set)")
	}
	d.pool.mu.Lock()
	known := d.pool.idle[req.Conversation] != nil || d.pool.running[req.Conversation] != nil
	room := d.pool.roomForWarm(req.Conversation)
	d.pool.mu.Unlock()
	switch {
	case known:
		return nil
	case !room:
		return ErrNoRoom
	}
	// Below real work, as a spare: after a failover every conversation
	// taken is prewarmed at once, while the messages being answered need
	// the CPUs most.
	cli, err := d.spawn(req, d.fingerprint(req), d.procs.StartLow)
	if err != nil {
		return err
	}
	cli.low = true
	if !d.pool.adopt(req.Conversation, cli) {
		d.pool.endLater(cli)
		return ErrNoRoom
	}
	return nil
}

// Expect tells the driver that a message of conversation waits for a
// Claude slot: its process, if one was started ahead for it below real
// work (PrewarmResume), is raised now, so that it finishes starting while
// the message waits rather than once it has a slot.
func (d *Driver) Expect(conversation string) {
	d.pool.mu.Lock()
	cli := d.pool.idle[conversation]
	low := cli != nil && cli.low
	if low {
		cli.low = false
	}
	d.pool.mu.Unlock()
	if low {
		d.raise(cli)
	}
}

// followSpares lets the sets of req's bot follow req's shape when it is
// a request of a conversation (see KeepSpares).
func (d *Driver) followSpares(req Request, fingerprint string) {
	if req.Conversation == "" || !d.pool.sparesOn() {
		return
	}
	fresh := req.SessionID == "" && !req.Resume
	d.pool.followSpares(req.BotID, shapeOf(req), fingerprint, d.lineage(req), d.cfg.Warm.Spares, fresh)
}

// lineage is what of req's shape its brain gives: its fingerprint but for
// what a kind of request adds (a conversation's question tool, a panel
// turn's schema). Shapes of one lineage are requests of one brain; another
// lineage is another brain, or an edited one.
func (d *Driver) lineage(req Request) string {
	req.Questions, req.JSONSchema = false, ""
	return d.fingerprint(req)
}

// takeSpare takes a ready spare for a new conversation of fingerprint,
// waiting for one still starting as long as that is worth it; nil when
// there is none (a miss, counted).
func (d *Driver) takeSpare(ctx context.Context, fingerprint string) *live {
	if !d.pool.sparesOn() {
		return nil
	}
	var deadline <-chan time.Time
	for {
		t := d.pool.takeSpare(fingerprint)
		for _, cli := range t.raise {
			d.raise(cli)
		}
		if t.cli != nil {
			return t.cli
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
			return nil
		}
		break
	}
	d.pool.missed(fingerprint)
	return nil
}

// raise brings a spare taken for a conversation, or one a conversation
// waits for, or a prewarmed conversation's process taken by its request,
// back to brainbot's CPU priority, in the background (it reads
// /proc): where the rlimit allows
// it (systemd's LimitNICE=+0, as in deploy/brainbot.service) or
// privilege. Else the conversation's CLI stays at nice +10, said once.
func (d *Driver) raise(cli *live) {
	d.pool.ending.Add(1)
	go func() {
		defer d.pool.ending.Done()
		if err := d.procs.Raise(cli.p.Pid()); err != nil && !errors.Is(err, reaper.ErrClosed) {
			d.raiseFailed.Do(func() {
				d.log.Info("claude: CLIs started ahead of their request (spares, prewarmed conversations) keep their lower CPU priority (nice +10) once a request takes them: brainbot may not raise them back (LimitNICE=+0 in its systemd unit allows it)", zap.Error(err))
			})
		}
	}()
}

// shapeOf is what of req a process is started with, but its session: a
// spare's shape. Of the prompt's variables only those that hold for the
// bot are kept (the others reach the process with each message).
func shapeOf(req Request) Request {
	vars := maps.Clone(req.PromptVars)
	maps.DeleteFunc(vars, func(name, _ string) bool { return slices.Contains(sysprompt.PerMessage(), name) })
	return Request{
		Mode:         Text,
		SystemPrompt: req.SystemPrompt,
		PromptVars:   vars,
		Model:        req.Model,
		BotID:        req.BotID,
		MCPServers:   req.MCPServers,
		AllowedTools: req.AllowedTools,
		ToolTimeout:  req.ToolTimeout,
		MaxTurns:     req.MaxTurns,
		Questions:    req.Questions,
		Memory:       req.Memory,
		JSONSchema:   req.JSONSchema,
	}
}

// spareCost is how an admin reads what spares cost, at start-up.
func spareCost(w WarmConfig) string {
	bound := ""
	if w.SpareMemoryMB > 0 {
		bound = fmt.Sprintf(" and %d MB of memory (%d spares)", w.SpareMemoryMB, SparesIn(w.SpareMemoryMB))
	}
	return fmt.Sprintf("each bot keeps %d started Claude CLI (up to %d when new conversations come fast, and as many again for each other shape of its new conversations while they come, as guest answers), an idle process of ~%d MB each, within max warm %d%s; spares are ended first when it is full, and start at a lower CPU priority when no request waits",
		w.Spares, max(w.Spares, w.MaxSpares), SpareMB, w.Max, bound)
}

const (
	// cpuStallShare is the share of the time in which some runnable
	// thread waited for a CPU above which the CPUs count as all wanted;
	// cpuGauge measures it over at least cpuWindow, and over a fresh
	// window when its last look is older than cpuStale.
	cpuStallShare = 0.2
	cpuWindow     = 250 * time.Millisecond
	cpuStale      = 2 * time.Second
)

// cpuGauge says whether the CPUs were all wanted lately: where the kernel
// keeps pressure stall information (/proc/pressure/cpu), whether some
// runnable thread waited for a CPU more than cpuStallShare of the time
// since the gauge's last look. A first look, or one long after the last,
// says busy and measures from then on (tend looks again within a tick);
// looks closer than cpuWindow keep the last verdict. Elsewhere, whether
// more threads are runnable than CPUs now (/proc/loadavg). The stalls
// over a window are what counts: a reading at one instant finds a CPU
// free now and then on CPUs busy most of the time, and a spare started
// then takes the CPU from the requests waiting for it.
type cpuGauge struct {
	// stalls is the microseconds so far in which some thread waited for a
	// CPU; loadavg reads /proc/loadavg.
	stalls  func() (uint64, error)
	loadavg func() (string, error)
	cpus    int
	// at is the gauge's last look at the stalls, total their count then,
	// busy its verdict.
	at    time.Time
	total uint64
	busy  bool
}

// newCPUGauge reads this machine's /proc.
func newCPUGauge() *cpuGauge {
	proc, procErr := procfs.NewDefaultFS()
	return &cpuGauge{cpus: runtime.NumCPU(),
		stalls: func() (uint64, error) {
			if procErr != nil {
				return 0, procErr
			}
			return cpuStalls(proc)
		},
		loadavg: func() (string, error) {
			b, err := os.ReadFile("/proc/loadavg")
			return string(b), err
		}}
}

// cpuStalls reads the "some" line of /proc/pressure/cpu: the
// microseconds so far in which some thread waited for a CPU.
func cpuStalls(proc procfs.FS) (uint64, error) {
	psi, err := proc.PSIStatsForResource("cpu")
	if err != nil {
		return 0, err
	}
	if psi.Some == nil {
		return 0, errors.New("no stalls of some threads in /proc/pressure/cpu")
	}
	return psi.Some.Total, nil
}

// contended reports whether the CPUs were all wanted lately, as of now.
func (g *cpuGauge) contended(now time.Time) bool {
	since := now.Sub(g.at)
	if !g.at.IsZero() && since < cpuWindow {
		return g.busy
	}
	total, err := g.stalls()
	if err != nil {
		loadavg, err := g.loadavg()
		return err == nil && runnableOver(loadavg, g.cpus)
	}
	fresh := g.at.IsZero() || since > cpuStale || total < g.total
	g.busy = fresh || float64(total-g.total) > cpuStallShare*float64(since.Microseconds())
	g.at, g.total = now, total
	return g.busy
}

// runnableOver reports whether a /proc/loadavg line counts more threads
// runnable than cpus, the reader aside.
func runnableOver(loadavg string, cpus int) bool {
	fields := strings.Fields(loadavg)
	if len(fields) < 4 {
		return false
	}
	runnable, _, _ := strings.Cut(fields[3], "/")
	n, err := strconv.Atoi(runnable)
	return err == nil && n-1 > cpus
}
