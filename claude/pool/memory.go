package pool

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// The memory budget (issue 48): with Config.Memory the processes kept,
// a conversation's idle one or a spare, fit the box's memory as measured
// now, not a count guessed from an idle CLI's size. A process is kept
// only while the box uses less than KeepShare of its memory with one
// more of the kept processes' size; under pressure (the box past
// PressureShare, or tasks stalled for memory) the pool ends the kept
// processes worth least first, before the kernel kills one that is
// answering. What a kept process is worth: what it saves (a CLI start,
// the same for both kinds) times how likely it is used soon, which is
// how lately it was wanted: a conversation's last message, a set's last
// new conversation.

// Memory is the box's memory now, as Config.Memory reads it.
type Memory struct {
	// Limit is the memory the box has for brainbot (its cgroup's limit
	// where lower than the machine's), Used what is in use of it, in
	// bytes.
	Limit, Used int64
	// Stalled is the share of the last 10 s in which some tasks stalled
	// waiting for memory, in percent; negative when unknown.
	Stalled float64
}

// pressed reports whether the box is past PressureShare of its memory or
// its tasks stall for memory: what each process holds is read again then,
// for the relief to end no more than it must.
func (m Memory) pressed() bool {
	return m.Limit > 0 && (float64(m.Used) > PressureShare*float64(m.Limit) || m.Stalled >= pressureStall)
}

const (
	// KeepShare is the share of the box's memory in use up to which a
	// process is kept: the rest is for the answers running, which grow,
	// and for brainbot. Measured on 1 CPU and 2 GB (issue 48): a fixed 14
	// kept CLIs ran the box out of memory; following the memory, three
	// quarters peaked at 1,635 MB (80%) with 36 users; four fifths, with a
	// cold start making its room at once (roomForStart), at 1,741 MB
	// (85%), and with 12 users kept 2 more answers of 48 warm, text's
	// median 535 ms against 693.
	KeepShare = 0.8
	// PressureShare and pressureStall say when the box is short: past
	// this share of its memory in use, or tasks stalled for memory this
	// share of the last 10 s. The pool then ends kept processes until
	// it is back within KeepShare.
	PressureShare = 0.9
	pressureStall = 10.0
	// defaultOwn is what a kept process is taken to hold before one was
	// measured: an idle CLI 2.1.328 with two MCP servers holds ~100 MB
	// of its own.
	defaultOwn = 100 << 20
	// memoryLook is how often the pool reads the box's memory and the
	// memory of each process it has not read yet; ownLooks how many looks
	// it reads again what every kept process holds (every look while the
	// box is pressed). An idle process's own
	// memory hardly moves, and reading it (smaps_rollup) costs about a
	// millisecond of CPU: every second, many kept CLIs would take a few
	// percent of a CPU for nothing.
	memoryLook = time.Second
	ownLooks   = 10
	// stallWindow is the window of the stalls read (PSI's avg10): after
	// ending processes for stalls the pool waits that long for the count
	// to show it before it ends more for stalls.
	stallWindow = 10 * time.Second
)

// memoryRoom is how many more processes the box's memory has room for,
// as of the last look; math.MaxInt without a memory budget.
func (s *state[P, S]) memoryRoom() int {
	if s.cfg.Memory == nil || s.mem.Limit <= 0 {
		return math.MaxInt
	}
	free := KeepShare*float64(s.mem.Limit) - float64(s.mem.Used)
	return max(0, int(free/float64(s.ownEstimate())))
}

// ownEstimate is what one more kept process will hold: the most an idle
// one or a spare holds now (a conversation's that has answered holds
// more than a spare), or defaultOwn before any was measured.
func (s *state[P, S]) ownEstimate() int64 {
	most := int64(0)
	for _, n := range s.own {
		most = max(most, n)
	}
	if most == 0 {
		return defaultOwn
	}
	return most
}

// short reports whether the box is short of memory, as of the last look:
// past PressureShare, or stalled for it (unless processes were ended for
// stalls within the stalls' window, which still counts the time before).
func (s *state[P, S]) short(now time.Time) bool {
	if s.cfg.Memory == nil || s.mem.Limit <= 0 {
		return false
	}
	stalled := s.mem.Stalled >= pressureStall && now.Sub(s.relievedAt) >= stallWindow
	return float64(s.mem.Used) > PressureShare*float64(s.mem.Limit) || stalled
}

// kept is one process the pool keeps, idle: a conversation's or a spare.
type kept[P Proc, S any] struct {
	proc  P
	key   string       // the conversation's, for an idle process
	spare *spare[P, S] // or the spare
	worth float64
}

// keptByWorth lists the idle processes and the spares, least worth
// first, a spare before a conversation's process worth the same (a
// spare is the quicker to replace: it needs no session loaded). Spares
// still starting are listed only with starting: ending one frees little
// memory yet, but counts against Max as any.
func (s *state[P, S]) keptByWorth(now time.Time, starting bool) []kept[P, S] {
	var all []kept[P, S]
	for _, set := range s.sets {
		for i, sp := range set.spares {
			if sp.ready || starting {
				all = append(all, kept[P, S]{proc: sp.proc, spare: sp, worth: s.spareWorth(set, i, now)})
			}
		}
	}
	for key, w := range s.idle {
		all = append(all, kept[P, S]{proc: w.proc, key: key, worth: likely(now.Sub(w.lastUsed), s.cfg.Idle)})
	}
	slices.SortStableFunc(all, func(a, b kept[P, S]) int {
		return cmp.Or(cmp.Compare(a.worth, b.worth), strings.Compare(a.key, b.key))
	})
	return all
}

// likely is how likely a process wanted since ago is used again soon:
// it halves every horizon/8 (a conversation idle for its whole Idle is
// worth 1/256 of one just answered).
func likely(ago, horizon time.Duration) float64 {
	return math.Exp2(-8 * ago.Seconds() / horizon.Seconds())
}

// spareWorth is what the i-th spare of set is worth: a set's first spare
// serves every new conversation of its shape, so it is worth as much as
// the set is likely wanted (the set's last new conversation, against
// SpareIdle); each later one half the one before; and a set of another
// shape than its bot's conversations' half a bot's own, a caller's set
// (a panel's) a quarter (rank).
func (s *state[P, S]) spareWorth(set *spareSet[P, S], i int, now time.Time) float64 {
	return likely(now.Sub(lastWanted(set)), s.cfg.SpareIdle) / float64(int(1)<<(i+set.rank()))
}

// relieve ends kept processes, least worth first, while the box is short
// of memory: until what they held brings its use back within KeepShare.
// It returns them to end.
func (s *state[P, S]) relieve(now time.Time) []P {
	if !s.short(now) {
		return nil
	}
	s.relievedAt = now
	used := s.mem.Used
	ended := s.shed(now, int64(KeepShare*float64(s.mem.Limit)), 1)
	if len(ended) > 0 {
		s.log.Info("claude: kept CLIs ended: the box is short of memory", zap.Int("ended", len(ended)),
			zap.Int64("used_mb", used>>20), zap.Int64("limit_mb", s.mem.Limit>>20), zap.Float64("stalled_pct", s.mem.Stalled))
	}
	return ended
}

// roomForStart counts a process started for a request in the memory in
// use, at what the largest kept one holds (one that has answered: the
// new one will have), and ends kept processes, least worth first, where
// the box would pass PressureShare with it. Now, not at the next look: a
// cold start grows by a hundred megabytes in a third of a second, and on
// a box of 1 GB two of them beside the kept processes ran it out of
// memory before the look, the kernel killing CLIs that answered. It
// returns them to end.
func (s *state[P, S]) roomForStart(now time.Time) []P {
	if s.cfg.Memory == nil || s.mem.Limit <= 0 {
		return nil
	}
	used := s.mem.Used
	s.mem.Used += s.ownEstimate() // until the next look reads it
	ended := s.shed(now, int64(PressureShare*float64(s.mem.Limit)), 0)
	if len(ended) > 0 {
		s.log.Info("claude: kept CLIs ended: the box has no room for a CLI started for a request", zap.Int("ended", len(ended)),
			zap.Int64("used_mb", used>>20), zap.Int64("limit_mb", s.mem.Limit>>20))
	}
	return ended
}

// shed ends kept processes, least worth first, until the memory in use
// less what they held is within target and at least atLeast ended, and
// counts what they held out of it until the next look. It returns them
// to end.
func (s *state[P, S]) shed(now time.Time, target int64, atLeast int) []P {
	var ended []P
	for _, k := range s.keptByWorth(now, false) {
		if s.mem.Used <= target && len(ended) >= atLeast {
			break
		}
		own := s.own[k.proc]
		if own == 0 {
			own = defaultOwn
		}
		s.mem.Used -= own
		ended = append(ended, s.drop(k))
	}
	return ended
}

// drop takes k out of the pool and returns its process to end.
func (s *state[P, S]) drop(k kept[P, S]) P {
	if k.spare != nil {
		s.removeSpare(k.spare)
	} else {
		delete(s.idle, k.key)
	}
	delete(s.own, k.proc)
	return k.proc
}

// watchMemory reads the box's memory and what each kept process holds
// every memoryLook, and relieves the box when it is short, until Close.
func (p *Pool[P, S]) watchMemory() {
	defer close(p.watched)
	tick := time.NewTicker(memoryLook)
	defer tick.Stop()
	for {
		p.lookAtMemory()
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
	}
}

// lookAtMemory reads the memory and what each idle process and spare
// holds (one read lately, while the box is not pressed: as it was then)
// without the lock (reading /proc takes its time), then records it and
// ends what the box has no room for.
func (p *Pool[P, S]) lookAtMemory() {
	p.mu.Lock()
	again := p.s.looks%ownLooks == 0
	p.s.looks++
	known := map[P]int64{}
	var procs []P
	add := func(proc P) {
		procs = append(procs, proc)
		if own, ok := p.s.own[proc]; ok {
			known[proc] = own
		}
	}
	for _, w := range p.s.idle {
		add(w.proc)
	}
	for _, set := range p.s.sets {
		for _, sp := range set.spares {
			add(sp.proc)
		}
	}
	p.mu.Unlock()
	mem := p.cfg.Memory()
	again = again || mem.pressed()
	own := make(map[P]int64, len(procs))
	for _, proc := range procs {
		if held, ok := known[proc]; ok && !again {
			own[proc] = held
			continue
		}
		own[proc] = p.cfg.Own(proc)
	}
	p.mu.Lock()
	p.s.mem, p.s.own = mem, own
	ended := p.s.relieve(time.Now())
	p.mu.Unlock()
	p.endAll(ended)
}
