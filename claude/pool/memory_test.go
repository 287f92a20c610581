package pool

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// box is the memory a test's pool reads: a box of limit, what is in
// use, its stalls, and what each fake holds of its own.
type box struct {
	mu  sync.Mutex
	mem Memory
	own map[*fake]int64
	// reads counts the reads of each process's own memory.
	reads map[*fake]int
}

func newBox(limitMB, usedMB int64) *box {
	return &box{mem: Memory{Limit: limitMB << 20, Used: usedMB << 20, Stalled: -1}, own: map[*fake]int64{}, reads: map[*fake]int{}}
}

// budget gives cfg the box as its memory.
func (b *box) budget(cfg Config[*fake, string]) Config[*fake, string] {
	cfg.Memory = func() Memory {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.mem
	}
	cfg.Own = func(f *fake) int64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.reads[f]++
		return b.own[f]
	}
	return cfg
}

func (b *box) set(change func(b *box)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	change(b)
}

// A box's memory bounds the spares started, not Max: a process is kept
// while the box uses less than four fifths of its memory with one
// more, at the most a kept process holds (an idle CLI's size before one
// was measured).
func TestMemoryBoundsTheKept(t *testing.T) {
	b := newBox(2048, 1200)
	p := testPool(b.budget(Config[*fake, string]{Max: 20, Spares: 1, MaxStarting: 10}))
	p.s.mem = b.mem
	set := addSet(p, "bot", 1, 8)
	now := time.Now()
	if n := len(p.s.planStarts(now.Add(time.Hour))); n != 4 { // (1638 - 1200) / 100
		t.Errorf("%d started in 438 MB at 100 MB each, want 4", n)
	}
	set.pending = 0
	p.s.own = map[*fake]int64{newFake(): 150 << 20} // a kept process measured
	if n := len(p.s.planStarts(now.Add(time.Hour))); n != 2 {
		t.Errorf("%d started in 438 MB at 150 MB each, want 2", n)
	}
	set.pending = 0
	p.s.mem.Used = 1500 << 20
	if n := len(p.s.planStarts(now.Add(time.Hour))); n != 0 {
		t.Errorf("%d started with the box within 150 MB of four fifths", n)
	}
	if p.s.roomForWarm("bot/new") {
		t.Error("room for a conversation's process ahead of its message in a full box")
	}
}

// What an idle process holds of its own is read when it is first kept,
// then every ownLooks looks, not each second: a read costs about a
// millisecond of CPU, and many kept CLIs would spend a few percent of a
// CPU on it. (While the box is pressed every look reads it again:
// TestShortOfMemoryEndsIdleFirst ends no more than fresh readings call
// for.)
func TestOwnMemoryReadSparingly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBox(2000, 1000)
		e := newEnv(t, b.budget(Config[*fake, string]{Max: 10, Idle: time.Hour}))
		idle := newFake()
		e.request("bot/idle", idle)
		reads := func() int {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.reads[idle]
		}
		settle(ownLooks * memoryLook)
		if n := reads(); n < 1 || n > 2 {
			t.Errorf("read %d times in %d looks, want once, and once again after %d", n, ownLooks, ownLooks)
		}
	})
}

// When the box runs short (past 90% of its memory), the pool ends idle
// processes, the least likely used first, until what they held brings it
// back within four fifths; a process answering is never ended.
func TestShortOfMemoryEndsIdleFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBox(2000, 1000)
		e := newEnv(t, b.budget(Config[*fake, string]{Max: 10, Idle: time.Hour}))
		old, older, recent, answering := newFake(), newFake(), newFake(), newFake()
		e.request("bot/older", older)
		settle(10 * time.Minute)
		e.request("bot/old", old)
		settle(10 * time.Minute)
		e.request("bot/recent", recent)
		e.p.Busy("bot/answering", answering)
		b.set(func(b *box) {
			for _, f := range []*fake{old, older, recent, answering} {
				b.own[f] = 200 << 20
			}
			b.mem.Used = 1900 << 20 // past 1800
		})
		settle(memoryLook)
		if !older.ended() || !old.ended() {
			t.Error("the two least recently used idle processes still run in a box short of memory")
		}
		if recent.ended() || answering.ended() {
			t.Error("more ended than brings the box back within four fifths (1900 - 2 x 200 = 1500 <= 1600), or one answering")
		}
		if len(e.logs.FilterMessage("claude: kept CLIs ended: the box is short of memory").All()) != 1 {
			t.Error("no log line of the processes ended for memory")
		}
	})
}

// Tasks stalled for memory are a shortage too, whatever the box's use
// says, and each look ends what is worth least: a conversation idle for
// half an hour, then a panel's spare, then the bot's own set's spare,
// and a conversation just answered last.
func TestStallsEndWhatIsWorthLeast(t *testing.T) {
	b := newBox(2000, 1000)
	p := testPool(b.budget(Config[*fake, string]{Max: 10, Spares: 1, Idle: time.Hour}))
	now := time.Now()
	ready := func(name string) *fake {
		set := addSet(p, name, 1, 1)
		set.made = now.Add(-time.Minute)
		f := newFake()
		set.spares = append(set.spares, &spare[*fake, string]{proc: f, set: set, ready: true, settled: make(chan struct{})})
		return f
	}
	botSpare, panelSpare := ready("bot"), ready("panel/x")
	idle, fresh := newFake(), newFake()
	p.s.idle["bot/idle"] = &warm[*fake]{proc: idle, lastUsed: now.Add(-30 * time.Minute)}
	p.s.idle["bot/fresh"] = &warm[*fake]{proc: fresh, lastUsed: now}
	p.s.mem = Memory{Limit: 2000 << 20, Used: 1000 << 20, Stalled: 25}
	if ended := p.s.relieve(now); len(ended) != 1 || ended[0] != idle {
		t.Fatalf("%d ended, not the one worth least alone", len(ended))
	}
	// The stalls of the last 10 s still count the time before: no more
	// end for them until that window has passed.
	if ended := p.s.relieve(now.Add(stallWindow / 2)); len(ended) != 0 {
		t.Errorf("%d more ended within the stalls' window", len(ended))
	}
	for i, want := range []*fake{panelSpare, botSpare, fresh} {
		if ended := p.s.relieve(now.Add(time.Duration(i+1) * stallWindow)); len(ended) != 1 || ended[0] != want {
			t.Fatalf("look %d ended %d processes, not the one worth least", i+2, len(ended))
		}
	}
	p.s.mem.Stalled = 0
	if ended := p.s.relieve(now.Add(time.Hour)); len(ended) != 0 {
		t.Errorf("%d ended with no stalls and room", len(ended))
	}
}

// A process started for a request makes its room at once: where the
// box would pass 90% of its memory with it, at what the largest kept
// process holds, the kept ones worth least end then, not at the next
// look, and no more than that room calls for. A second start before the
// next look counts the first.
func TestColdStartMakesRoomAtOnce(t *testing.T) {
	b := newBox(1000, 700)
	p := testPool(b.budget(Config[*fake, string]{Max: 10, Idle: time.Hour}))
	now := time.Now()
	older, old, recent := newFake(), newFake(), newFake()
	p.s.idle["bot/older"] = &warm[*fake]{proc: older, lastUsed: now.Add(-20 * time.Minute)}
	p.s.idle["bot/old"] = &warm[*fake]{proc: old, lastUsed: now.Add(-10 * time.Minute)}
	p.s.idle["bot/recent"] = &warm[*fake]{proc: recent, lastUsed: now}
	p.s.mem = b.mem
	p.s.own = map[*fake]int64{older: 150 << 20, old: 150 << 20, recent: 150 << 20}

	// 700 + 150 = 850 MB: within 900, nothing ends.
	if ended := p.s.roomForStart(now); len(ended) != 0 {
		t.Fatalf("%d ended for a start the box has room for", len(ended))
	}
	// 850 + 150 = 1000 MB: the one idle longest ends (850).
	if ended := p.s.roomForStart(now); len(ended) != 1 || ended[0] != older {
		t.Fatalf("%d ended for a second start, not the one idle longest alone", len(ended))
	}
	if _, kept := p.s.idle["bot/recent"]; !kept {
		t.Error("the conversation just answered ended")
	}
	if p.s.mem.Used != 850<<20 {
		t.Errorf("the memory in use counts %d MB until the next look, want 850", p.s.mem.Used>>20)
	}
}

// ColdStart is the port: a request's start ends the kept process worth
// least when the box has no room, and logs why.
func TestColdStartEndsForItsRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBox(1000, 850)
		e := newEnv(t, b.budget(Config[*fake, string]{Max: 10, Idle: time.Hour}))
		idle := newFake()
		e.request("bot/idle", idle)
		b.set(func(b *box) { b.own[idle] = 150 << 20 })
		settle(ownLooks * memoryLook) // read
		e.p.ColdStart()()
		synctest.Wait()
		if !idle.ended() {
			t.Error("the idle process still runs where a start has no room (850 + 150 MB of 1,000)")
		}
		if len(e.logs.FilterMessage("claude: kept CLIs ended: the box has no room for a CLI started for a request").All()) != 1 {
			t.Error("no log line of the process ended for a start")
		}
	})
}
