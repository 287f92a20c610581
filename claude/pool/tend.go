package pool

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// tendLoop tends the spares until Close: at once when woken, else on a
// tick that notices hung and idle ones in time.
func (p *Pool[P, S]) tendLoop() {
	defer close(p.tended)
	tick := time.NewTicker(min(max(min(p.cfg.SpareStart, p.cfg.SpareIdle)/4, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		p.tend()
		select {
		case <-p.stop:
			return
		case <-p.kick:
		case <-tick.C:
		}
	}
}

// tend ends the spares that hung in their start or sat unused for
// SpareIdle, and starts what the sets lack, as far as the budget allows.
func (p *Pool[P, S]) tend() {
	now := time.Now()
	p.mu.Lock()
	ended := p.s.retire(now)
	ended = append(ended, p.s.makeRoom(now)...)
	starts := p.s.planStarts(now)
	p.mu.Unlock()
	p.endAll(ended)
	for _, set := range starts {
		p.startSpare(set)
	}
}

// retire takes out the spares that hung in their start or sat unused for
// SpareIdle; a set of another shape whose spare sat unused goes, and a
// set grown beyond its count shrinks back.
func (s *state[P, S]) retire(now time.Time) []P {
	var ended []P
	for _, set := range s.sets {
		for _, sp := range slices.Clone(set.spares) {
			switch {
			case sp.gone: // its set went meanwhile
			case !sp.ready && now.Sub(sp.started) > s.cfg.SpareStart:
				s.log.Warn("claude: a spare CLI did not start in time; replacing it", zap.String("spares", set.name), zap.Duration("spare_start_ms", s.cfg.SpareStart))
				s.removeSpare(sp)
				s.failed(set, now)
				ended = append(ended, sp.proc)
			case sp.ready && now.Sub(sp.readyAt) > s.cfg.SpareIdle:
				s.removeSpare(sp)
				ended = append(ended, sp.proc)
				unused := set.lastTaken.Before(sp.started)
				switch {
				case unused && set.other: // its shape's conversations stopped coming
					s.log.Debug("claude: spares of another shape ended: unused", zap.String("spares", set.name), zap.Duration("spare_idle_ms", s.cfg.SpareIdle))
					ended = append(ended, s.dropSet(set)...)
				case unused && set.target > set.base:
					set.target-- // not needed while it waited: the set shrinks back
				}
			}
		}
	}
	return ended
}

// planStarts picks the sets to start a spare for, one at a time to the
// first ranked set that has the fewest, while the budget has room, and
// when it is quiet (see the package doc): while that set waits for a
// quiet moment, none ranked after it starts (it would end their spare for
// its own, makeRoom). Conversations' busy processes count here too: idle
// again, they would end a spare started meanwhile. Each pick is counted
// as pending.
func (s *state[P, S]) planStarts(now time.Time) []*spareSet[P, S] {
	room := min(s.room(), s.cfg.MaxStarting-s.starting(), s.spareMemoryRoom())
	busy := s.active > 0 || now.Sub(s.lastActive) < spareSettle
	asked := false // whether real work wants the machine: asked once
	var starts []*spareSet[P, S]
	for ; room > 0; room-- {
		next := s.neediest(now)
		if next == nil || busy && now.Sub(next.short) < spareQuiet {
			break
		}
		if !asked {
			if s.yield(now.Sub(next.short), busy) {
				break
			}
			asked = true
		}
		next.pending++
		starts = append(starts, next)
	}
	return starts
}

// neediest is the set to start a spare for next: of those lacking one and
// not pausing after failures, the first ranked that has the fewest, then
// the one wanted last. It notes when each set began to lack one.
func (s *state[P, S]) neediest(now time.Time) *spareSet[P, S] {
	var next *spareSet[P, S]
	for _, set := range s.sets {
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
			strings.Compare(set.name, next.name), strings.Compare(set.spec.Fingerprint, next.spec.Fingerprint)) < 0 {
			next = set
		}
	}
	return next
}

// yield reports whether real work wants the machine now, for a set that
// has lacked a spare for lacked: a request waits for a Claude slot, or
// for a CPU: a request's process is starting, or the CPUs are all wanted.
// ours says whether requests of ours run (or just ended): then they are
// what waits for the CPUs, however long; else the CPUs are busy with
// other work, and a set that lacked a spare for spareCPUPatience starts
// it anyway, below that work.
func (s *state[P, S]) yield(lacked time.Duration, ours bool) bool {
	return s.cfg.Waiting() > 0 || s.cold > 0 || (ours || lacked < spareCPUPatience) && s.cfg.CPUBusy()
}

// startSpare starts one spare for set.
func (p *Pool[P, S]) startSpare(set *spareSet[P, S]) {
	started := time.Now()
	proc, err := p.cfg.Start(set.spec.Shape)
	p.mu.Lock()
	set.pending--
	var ended []P
	switch {
	case err != nil:
		p.log.Warn("claude: a spare CLI could not be started", zap.String("spares", set.name), zap.Error(err))
		p.s.failed(set, time.Now())
	case p.s.closed || p.s.sets[set.key()] != set:
		ended = append(ended, proc) // the set was dropped or replaced meanwhile
	default:
		p.s.stats.Started++
		sp := &spare[P, S]{proc: proc, set: set, started: started, settled: make(chan struct{})}
		set.spares = append(set.spares, sp)
		p.ending.Go(func() { p.watch(sp) })
		p.s.announce() // a request waiting for it raises it
		ended = p.s.trim()
	}
	p.mu.Unlock()
	p.endAll(ended)
}

// failed counts a spare of set that failed and makes the set pause before
// it tries again, longer each time in a row.
func (s *state[P, S]) failed(set *spareSet[P, S], now time.Time) {
	s.stats.Failed++
	set.failures++
	set.retryAt = now.Add(min(time.Second<<min(set.failures-1, 16), maxRetryPause))
	s.announce()
}

// watch marks sp ready when its process is, and replaces it if the
// process exits first or while it waits; it stops when sp leaves its set.
func (p *Pool[P, S]) watch(sp *spare[P, S]) {
	select {
	case <-sp.proc.Ready():
		p.spareReady(sp)
	case <-sp.proc.Exited():
		p.spareDied(sp)
		return
	case <-sp.settled:
		return
	}
	select {
	case <-sp.proc.Exited():
		p.spareDied(sp)
	case <-sp.settled:
	}
}

func (p *Pool[P, S]) spareReady(sp *spare[P, S]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp.gone {
		return
	}
	sp.ready, sp.readyAt = true, time.Now()
	sp.set.lastStartup = sp.readyAt.Sub(sp.started)
	sp.set.failures = 0
	p.s.announce()
	p.log.Debug("claude: spare ready", zap.String("spares", sp.set.name), zap.Duration("startup_ms", sp.set.lastStartup))
}

func (p *Pool[P, S]) spareDied(sp *spare[P, S]) {
	p.mu.Lock()
	if sp.gone {
		p.mu.Unlock()
		return
	}
	p.s.removeSpare(sp)
	p.s.failed(sp.set, time.Now())
	p.mu.Unlock()
	p.log.Warn("claude: a spare CLI exited before it was used; replacing it", zap.String("spares", sp.set.name),
		zap.Int("exit_code", sp.proc.ExitCode()), zap.String("stderr", sp.proc.StderrTail()))
	p.endLater(sp.proc)
	p.wake()
}
