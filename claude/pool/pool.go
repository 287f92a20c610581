package pool

import (
	"errors"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/syscpu"
)

// ErrNoRoom means the budget (Config.Max) has no room for another
// process.
var ErrNoRoom = errors.New("claude: the warm-process budget (max warm) is full")

// Proc is what the pool needs of a process it keeps: a constraint, met
// by a pointer to the caller's process (the pool tells processes apart
// by ==).
type Proc interface {
	comparable
	// Ready is closed once the process is done starting (a CLI: it
	// reached brainbot's tool server); Exited once it exited.
	Ready() <-chan struct{}
	Exited() <-chan struct{}
	// Shutdown ends the process, releases what it held and returns once
	// it exited.
	Shutdown()
	// ExitCode and StderrTail say why a process that exited did, for
	// the log.
	ExitCode() int
	StderrTail() string
}

// Spec is what a set of spares is kept for.
type Spec[S any] struct {
	// Shape is what Config.Start starts a spare of the set with.
	Shape S
	// Fingerprint is everything a process of the shape is started with
	// but its session: a new conversation with the same takes a spare.
	Fingerprint string
	// Lineage is what of the fingerprint its brain gives: a set of
	// another lineage under the same name is of an older brain.
	Lineage string
	// Bot is whose the spares are (CLIsOf).
	Bot string
}

// Config configures a Pool. The zero value of a bound keeps its default.
type Config[P Proc, S any] struct {
	// Max is how many idle processes are kept, spares included: those
	// worth least are ended first (a conversation's by how lately it was
	// used, a spare by how lately its set was wanted; memory.go). 0 keeps
	// none, and no spares.
	Max int
	// Idle ends a conversation's process unused this long (default 10m).
	Idle time.Duration
	// Spares is how many spares a bot keeps for its new conversations
	// (Follow); 0 turns spares off altogether.
	Spares int
	// MaxSpares is how many one set grows to at most when its new
	// conversations come faster than its spares are replaced (default
	// 4; a set asked for more keeps its own count).
	MaxSpares int
	// SpareIdle ends a spare unused this long and starts a fresh one
	// (default 10m); a set grown beyond its count shrinks back so.
	SpareIdle time.Duration
	// SpareStart is how long a spare may take to be ready: one that is
	// not by then is taken for hung, ended and replaced (default 30s).
	SpareStart time.Duration
	// SpareMemoryMB, when set, caps the memory all spares together may
	// hold, at SpareMB each, beside the budget they count in with the
	// idle processes (0: no cap of their own, the default).
	SpareMemoryMB int
	// Memory, when set, reads the box's memory now, and Own what a
	// process holds of its own, in bytes (0: not known): the processes
	// kept then fit the memory measured as well as Max, and the kept
	// ones worth least are ended when the box runs short (memory.go).
	// Nil: Max (and SpareMemoryMB) alone bound them.
	Memory func() Memory
	Own    func(P) int64

	// Start starts a spare of shape, with a session of its own, below
	// real work.
	Start func(shape S) (P, error)
	// Raise brings a process started below real work back to it; the
	// pool calls it in the background.
	Raise func(P)
	// Differs names what two shapes of one lineage differ in, for the
	// log.
	Differs func(a, b S) []string
	// Waiting says how many requests wait for a Claude slot: spares
	// start only when none does. Nil: none ever waits.
	Waiting func() int
	// CPUBusy says whether the CPUs brainbot may use are all wanted
	// lately. Nil: this box's, read by syscpu (cpuGauge).
	CPUBusy func() bool
	// MaxStarting bounds the spares starting at once (default: the CPUs
	// brainbot may use, its cgroup's quota where lower than the
	// machine's: syscpu).
	MaxStarting int
	Log         *zap.Logger
}

func (c Config[P, S]) withDefaults() Config[P, S] {
	if c.Idle <= 0 {
		c.Idle = 10 * time.Minute
	}
	if c.MaxSpares <= 0 {
		c.MaxSpares = 4
	}
	if c.SpareIdle <= 0 {
		c.SpareIdle = 10 * time.Minute
	}
	if c.SpareStart <= 0 {
		c.SpareStart = 30 * time.Second
	}
	if c.MaxStarting <= 0 {
		c.MaxStarting = syscpu.Host().CPUs().N
	}
	if c.Waiting == nil {
		c.Waiting = func() int { return 0 }
	}
	if c.CPUBusy == nil {
		cpu := newCPUGauge(syscpu.Host())
		c.CPUBusy = func() bool { return cpu.contended(time.Now()) }
	}
	if c.Differs == nil {
		c.Differs = func(S, S) []string { return nil }
	}
	if c.Raise == nil {
		c.Raise = func(P) {}
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	if c.Memory != nil && c.Own == nil {
		c.Own = func(P) int64 { return 0 }
	}
	return c
}

// Pool keeps idle processes by conversation and spares by set.
type Pool[P Proc, S any] struct {
	cfg Config[P, S]
	log *zap.Logger

	mu sync.Mutex
	s  *state[P, S] // guarded by mu

	// kick wakes tend.
	kick chan struct{}
	// stop ends the background loops; evicted, tended and watched are
	// closed when they are over.
	stop, evicted, tended, watched chan struct{}
	// ending counts what runs in the background: shutdowns, raises and
	// spare watchers.
	ending sync.WaitGroup
}

// New starts a pool: its loop that ends idle processes, and when spares
// are on the one that tends them.
func New[P Proc, S any](cfg Config[P, S]) *Pool[P, S] {
	cfg = cfg.withDefaults()
	p := &Pool[P, S]{cfg: cfg, log: cfg.Log, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), evicted: make(chan struct{}), tended: make(chan struct{}), watched: make(chan struct{})}
	p.s = newState(&p.cfg, p.wake)
	if cfg.Max > 0 {
		go p.evictIdle()
	} else {
		close(p.evicted) // nothing is ever idle
	}
	if cfg.Max > 0 && cfg.Memory != nil {
		go p.watchMemory()
	} else {
		close(p.watched)
	}
	if !p.SparesOn() {
		close(p.tended)
		return p
	}
	go p.tendLoop()
	p.log.Info("claude: spares on: "+spareCost(cfg.Spares, cfg.MaxSpares, cfg.Max, cfg.SpareMemoryMB), zap.Int("spares", cfg.Spares),
		zap.Int("max_spares", cfg.MaxSpares), zap.Int("max_warm", cfg.Max), zap.Duration("spare_idle_ms", cfg.SpareIdle))
	return p
}

// SparesOn reports whether the pool keeps spares.
func (p *Pool[P, S]) SparesOn() bool { return p.cfg.Spares > 0 && p.cfg.Max > 0 }

// wake makes tend look at the sets soon.
func (p *Pool[P, S]) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// TakeIdle takes conversation key's idle process when fits says it can
// serve the request, raising it when it was started below real work
// (Prewarm) and no Expect came first. An idle process that does not fit
// (another session, an edited brain, or it died) is ended.
func (p *Pool[P, S]) TakeIdle(key string, fits func(P) bool) (proc P, ok bool) {
	p.mu.Lock()
	w := p.s.take(key)
	if w != nil {
		p.s.claimed[w.proc] = true
	}
	p.mu.Unlock()
	switch {
	case w == nil:
		return proc, false
	case !fits(w.proc):
		p.mu.Lock()
		delete(p.s.claimed, w.proc)
		p.mu.Unlock()
		p.endLater(w.proc)
		return proc, false
	case w.low:
		p.raise(w.proc)
	}
	return w.proc, true
}

// Busy records that proc serves a request of conversation key (one with
// no key is nobody's).
func (p *Pool[P, S]) Busy(key string, proc P) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.s.claimed, proc)
	if key != "" {
		p.s.running[key] = proc
	}
}

// Done ends proc's request: it goes back to the pool as key's idle
// process when keep says so and the pool is open, else it is shut down.
// Beyond Max, the kept processes worth least are ended (trim).
func (p *Pool[P, S]) Done(key string, proc P, keep bool) {
	p.mu.Lock()
	delete(p.s.claimed, proc)
	if running, ok := p.s.running[key]; ok && running == proc {
		delete(p.s.running, key)
	}
	if !keep || p.s.closed || p.cfg.Max <= 0 {
		p.mu.Unlock()
		proc.Shutdown()
		return
	}
	p.s.idle[key] = &warm[P]{proc: proc, lastUsed: time.Now()}
	evicted := p.s.trim()
	p.mu.Unlock()
	p.endAll(evicted)
}

// Prewarm starts, with start, the process conversation key's next
// request will find idle, below real work (raised by Expect or by the
// request that takes it). It returns ErrNoRoom, and starts nothing, when
// the budget could hold it only by ending another conversation's process
// (spares are ended for it), and nil without starting anything when the
// conversation has its process already.
func (p *Pool[P, S]) Prewarm(key string, start func() (P, error)) error {
	p.mu.Lock()
	known, room := p.s.has(key), p.s.roomForWarm(key)
	p.mu.Unlock()
	switch {
	case known:
		return nil
	case !room:
		return ErrNoRoom
	}
	proc, err := start()
	if err != nil {
		return err
	}
	p.mu.Lock()
	if !p.s.roomForWarm(key) {
		p.mu.Unlock()
		p.endLater(proc)
		return ErrNoRoom
	}
	p.s.idle[key] = &warm[P]{proc: proc, lastUsed: time.Now(), low: true}
	ended := p.s.trim()
	p.mu.Unlock()
	p.endAll(ended)
	return nil
}

// Expect says a request of conversation key waits for a slot: its idle
// process, if it was started below real work (Prewarm), is raised now, so
// that it finishes starting while the request waits.
func (p *Pool[P, S]) Expect(key string) {
	p.mu.Lock()
	w := p.s.idle[key]
	low := w != nil && w.low
	if low {
		w.low = false
	}
	p.mu.Unlock()
	if low {
		p.raise(w.proc)
	}
}

// End shuts down conversation key's idle process and returns once it
// exited.
func (p *Pool[P, S]) End(key string) {
	p.mu.Lock()
	w := p.s.take(key)
	p.mu.Unlock()
	if w != nil {
		w.proc.Shutdown()
	}
}

// Has reports whether conversation key has a process, running or idle.
func (p *Pool[P, S]) Has(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.has(key)
}

// Running returns the process serving conversation key's request.
func (p *Pool[P, S]) Running(key string) (P, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	proc, ok := p.s.running[key]
	return proc, ok
}

// Warm is how many processes are idle in the pool.
func (p *Pool[P, S]) Warm() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.s.idle)
}

// CLIsOf counts bot's warm processes (by their conversation's key, which
// begins with the bot and a "/") and spares.
func (p *Pool[P, S]) CLIsOf(bot string) (warm, spares int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key := range p.s.idle {
		if strings.HasPrefix(key, bot+"/") {
			warm++
		}
	}
	for _, set := range p.s.sets {
		if set.spec.Bot == bot {
			spares += len(set.spares)
		}
	}
	return warm, spares
}

// RequestStarted counts a request running: spares wait for the requests
// running, and for a moment after the last one ended, to start.
func (p *Pool[P, S]) RequestStarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.active++
}

// RequestEnded counts a request ended.
func (p *Pool[P, S]) RequestEnded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.active--
	p.s.lastActive = time.Now()
	if p.s.active == 0 && p.SparesOn() {
		time.AfterFunc(spareSettle, p.wake) // tend looks when it has been quiet
	}
}

// ColdStart counts a process started for a request until the returned
// func is called (more calls do nothing): once it has started. Spares
// wait for it, and where the box's memory has no room for it the kept
// processes worth least end now (roomForStart).
func (p *Pool[P, S]) ColdStart() func() {
	p.mu.Lock()
	p.s.cold++
	ended := p.s.roomForStart(time.Now())
	p.mu.Unlock()
	p.endAll(ended)
	return sync.OnceFunc(func() {
		p.mu.Lock()
		p.s.cold--
		p.mu.Unlock()
		p.wake()
	})
}

// evictIdle ends each idle process once it was unused for Config.Idle,
// until Close: it sleeps until the first of them is due, not on a tick
// that would end it up to a tick late. A process put idle meanwhile is
// due an Idle from now, after the wake-up.
func (p *Pool[P, S]) evictIdle() {
	defer close(p.evicted)
	timer := time.NewTimer(p.cfg.Idle)
	defer timer.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-timer.C:
		}
		now := time.Now()
		p.mu.Lock()
		old := p.s.idleSince(now.Add(-p.cfg.Idle))
		due := p.s.nextIdleEnd(now)
		p.mu.Unlock()
		for _, proc := range old {
			p.log.Debug("claude: warm process ended: idle", zap.Duration("warm_idle_ms", p.cfg.Idle))
			p.endLater(proc)
		}
		timer.Reset(due.Sub(now))
	}
}

// Close ends every idle process and spare and waits for all shutdowns;
// processes busy with a request are ended when it is Done.
func (p *Pool[P, S]) Close() {
	p.mu.Lock()
	if p.s.closed {
		p.mu.Unlock()
		return
	}
	p.s.closed = true
	ended := p.s.endEverything()
	p.mu.Unlock()
	close(p.stop)
	<-p.evicted
	<-p.tended
	<-p.watched
	p.endAll(ended)
	p.ending.Wait()
}

// endAll shuts each process down without making the caller wait.
func (p *Pool[P, S]) endAll(procs []P) {
	for _, proc := range procs {
		p.endLater(proc)
	}
}

// endLater shuts proc down without making the caller wait for it.
func (p *Pool[P, S]) endLater(proc P) {
	p.ending.Go(proc.Shutdown)
}

// raise brings proc back to real work's priority in the background.
func (p *Pool[P, S]) raise(proc P) {
	p.ending.Go(func() { p.cfg.Raise(proc) })
}
