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
// caller may keep others (KeepSpares), a panel's for example. A set keeps
// its count ready and grows, up to WarmConfig.MaxSpares, when new
// conversations miss it; its spares count against WarmConfig.Max and are
// the first ended when the budget is tight. One goroutine (tend) starts
// and retires them; each spare has a watcher that marks it ready when its
// CLI reaches brainbot's tool server, and replaces it if it dies first.
//
// A CLI's start costs about half a second of CPU, and the CLI goes on
// with its start-up for a while after it reached the tool server. So
// spares start in quiet moments: while requests run, and for spareSettle
// after the last one ended, a spare a set lacks waits, up to spareQuiet
// (a panel's turns follow one another within that, and are not slowed by
// the spares they took being replaced); and no more start at once than
// the machine has CPUs.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

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
	// maxRetryPause bounds the pause before a set whose spares keep
	// failing tries again.
	maxRetryPause = 5 * time.Minute
)

// spares is the pool's part that holds the spares, guarded by pool.mu.
type spares struct {
	sets map[string]*spareSet
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
}

func newSpares() spares {
	return spares{sets: map[string]*spareSet{}, kick: make(chan struct{}, 1), readied: make(chan struct{}), stopped: make(chan struct{}),
		maxStarting: runtime.NumCPU()}
}

// spareSet is the spares kept for one shape under one name.
type spareSet struct {
	name        string
	shape       Request // what a spare is started with, but its session
	fingerprint string
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

// toEvict is the spare to end first when the budget is tight: the oldest
// of the set that has the most.
func (s *spares) toEvict() *spare {
	var most *spareSet
	for _, set := range s.sets {
		if len(set.spares) > 0 && (most == nil || len(set.spares) > len(most.spares) || len(set.spares) == len(most.spares) && set.name < most.name) {
			most = set
		}
	}
	if most == nil {
		return nil
	}
	return most.spares[0]
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

// keepSpares makes the set name keep n spares of shape (0 drops it). A
// set of another shape under that name is replaced: its spares end. With
// follow, the set is not made if missing, and an existing one keeps its
// count: a request of the set's conversations only says its shape.
func (p *pool) keepSpares(name string, shape Request, fingerprint string, n int, follow bool) {
	p.mu.Lock()
	set := p.spares.sets[name]
	var ended []*live
	switch {
	case p.closed || !p.sparesOn():
	case set != nil && set.fingerprint == fingerprint:
		if !follow {
			set.base = n
			set.target = min(max(set.target, n), p.maxTarget(set))
		}
	case follow && set == nil:
	case n <= 0 && !follow:
		if set != nil {
			ended = p.dropSet(set)
		}
	default:
		if set != nil {
			p.log.Info("claude: spares replaced: their shape changed (an edited brain)", zap.String("spares", name), zap.Int("ended", len(set.spares)))
			ended = p.dropSet(set)
			if follow {
				n = set.base
			}
		}
		p.spares.sets[name] = &spareSet{name: name, shape: shape, fingerprint: fingerprint, base: n, target: n}
	}
	p.mu.Unlock()
	p.endAll(ended)
	p.wake()
}

// hasSet reports whether spares are kept under name.
func (p *pool) hasSet(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spares.sets[name] != nil
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
	delete(p.spares.sets, set.name)
	p.announce() // requests waiting for one of its spares look again
	return ended
}

// removeSpare takes sp out of its set. Called with p.mu held.
func (p *pool) removeSpare(sp *spare) {
	sp.set.spares = slices.DeleteFunc(sp.set.spares, func(o *spare) bool { return o == sp })
	sp.gone = true
	close(sp.settled)
}

// takeSpare takes a ready spare of fingerprint for a new conversation.
// When none is ready but one is starting, it returns instead a channel
// closed when a spare gets ready or goes, and how long waiting for one is
// worth: until a start as long as the set's last would be over twice.
func (p *pool) takeSpare(fingerprint string) (*live, <-chan struct{}, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var worth time.Duration
	starting := false
	for _, set := range p.spares.sets {
		if set.fingerprint != fingerprint {
			continue
		}
		for _, sp := range set.spares {
			switch {
			case sp.ready && !isDone(sp.cli.p.exited):
				p.removeSpare(sp)
				set.lastTaken = now
				p.spares.stats.Taken++
				sp.cli.spare = true
				p.wake() // its replacement
				return sp.cli, nil, 0
			case !sp.ready:
				age := now.Sub(sp.cli.started)
				expected := cmp.Or(set.lastStartup, defaultStartup)
				worth = max(worth, min(2*expected, p.cfg.SpareStart)-age)
				starting = true
			}
		}
	}
	if !starting || worth <= 0 {
		return nil, nil, 0
	}
	return nil, p.spares.readied, worth
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
			case !sp.ready && now.Sub(sp.cli.started) > p.cfg.SpareStart:
				p.log.Warn("claude: a spare CLI did not start in time; replacing it", zap.String("spares", set.name), zap.Duration("spare_start_ms", p.cfg.SpareStart))
				p.removeSpare(sp)
				p.failed(set, now)
				ended = append(ended, sp.cli)
			case sp.ready && now.Sub(sp.readyAt) > p.cfg.SpareIdle:
				p.removeSpare(sp)
				ended = append(ended, sp.cli)
				if set.lastTaken.Before(sp.cli.started) && set.target > set.base {
					set.target-- // not needed while it waited: the set shrinks back
				}
			}
		}
	}
	starts := p.planStarts(now)
	p.mu.Unlock()
	p.endAll(ended)
	for _, set := range starts {
		p.startSpare(set)
	}
}

// planStarts picks the sets to start a spare for, one at a time to the
// set that has the fewest, while the budget has room, and when it is quiet
// (see the top of this file). Conversations' busy processes count here
// too: idle again, they would end a spare started meanwhile. Called with
// p.mu held; each pick is counted as pending.
func (p *pool) planStarts(now time.Time) []*spareSet {
	room := p.cfg.Max - len(p.idle) - len(p.running) - p.spares.held()
	room = min(room, p.spares.maxStarting-p.spares.starting())
	var starts []*spareSet
	for ; room > 0; room-- {
		var next *spareSet
		for _, set := range p.spares.sets {
			have := len(set.spares) + set.pending
			switch {
			case have >= set.target:
				set.short = time.Time{}
				continue
			case set.short.IsZero():
				set.short = now
			}
			busy := p.spares.active > 0 || now.Sub(p.spares.lastActive) < spareSettle
			if now.Before(set.retryAt) || busy && now.Sub(set.short) < spareQuiet {
				continue
			}
			if next == nil || have < len(next.spares)+next.pending || have == len(next.spares)+next.pending && set.name < next.name {
				next = set
			}
		}
		if next == nil {
			break
		}
		next.pending++
		starts = append(starts, next)
	}
	return starts
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
	case p.closed || p.spares.sets[set.name] != set:
		ended = append(ended, cli) // the set was dropped or replaced meanwhile
	default:
		p.spares.stats.Started++
		sp := &spare{cli: cli, set: set, settled: make(chan struct{})}
		set.spares = append(set.spares, sp)
		p.ending.Add(1)
		go p.watch(sp)
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
	case <-sp.cli.p.exited:
		p.spareDied(sp)
		return
	case <-sp.settled:
		return
	}
	select {
	case <-sp.cli.p.exited:
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
		zap.Int("exit_code", sp.cli.p.exitCode()), zap.String("stderr", sp.cli.p.stderrTail.String()))
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
// set of another shape under that name is replaced, and n == 0 drops the
// set (so does DropSpares).
//
// Run keeps the set of each bot's conversations itself, named by the
// bot's id (WarmConfig.Spares of them): made by the first request of a
// conversation that lets the driver name its session, and replaced when
// a request of a conversation comes with another shape (an edited brain).
// A caller keeps sets for other shapes, with names that are no bot id
// (containing "/"), e.g. a panel member's turns. Nothing is kept when
// spares are off (WarmConfig.Spares 0, or Max 0).
func (d *Driver) KeepSpares(set string, shape Request, n int) error {
	if err := d.checkShape(set, shape); err != nil {
		return err
	}
	d.pool.keepSpares(set, shapeOf(shape), d.fingerprint(shape), n, false)
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
	d.pool.keepSpares(set, Request{}, "", 0, false)
}

// SpareStats says how many spares are ready and how they served so far.
func (d *Driver) SpareStats() SpareStats { return d.pool.spareStats() }

// PrewarmResume starts, in the background, the CLI process that resumes
// req's conversation (req.Resume, req.SessionID and req.Conversation set,
// as for its next Run), so that its next message finds it warm: for the
// most recently active conversations after a restart, whose processes
// ended with the last brainbot. The process is the conversation's warm
// one from now on (WarmConfig: idle rules, recycling). It returns
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
	cli, err := d.spawn(req, d.fingerprint(req))
	if err != nil {
		return err
	}
	if !d.pool.adopt(req.Conversation, cli) {
		d.pool.endLater(cli)
		return ErrNoRoom
	}
	return nil
}

// followSpares lets the set of req's bot follow req's shape (see
// KeepSpares): a request of a conversation that lets the driver name its
// session makes the set; any request of a conversation replaces a set of
// another shape.
func (d *Driver) followSpares(req Request, fingerprint string) {
	if req.Conversation == "" || !d.pool.sparesOn() {
		return
	}
	follow := d.pool.hasSet(req.BotID)
	if !follow && (req.SessionID != "" || req.Resume) {
		return
	}
	d.pool.keepSpares(req.BotID, shapeOf(req), fingerprint, d.cfg.Warm.Spares, follow)
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
		cli, wait, worth := d.pool.takeSpare(fingerprint)
		if cli != nil {
			return cli
		}
		if wait == nil {
			break
		}
		if deadline == nil {
			t := time.NewTimer(worth)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-wait:
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
		JSONSchema:   req.JSONSchema,
	}
}

// spareCost is how an admin reads what spares cost, at start-up.
func spareCost(w WarmConfig) string {
	return fmt.Sprintf("each bot keeps %d started Claude CLI (up to %d when new conversations come fast), an idle process of ~%d MB each, within max warm %d; spares are ended first when it is full",
		w.Spares, max(w.Spares, w.MaxSpares), spareMB, w.Max)
}

// spareMB is about what one spare holds: an idle CLI's resident memory
// (measured by BenchmarkNewConversation on 2.1.328).
const spareMB = 175
