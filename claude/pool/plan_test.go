package pool

import (
	"testing"
	"time"
)

// The start policy's decisions, one look of tend at a time, at the times
// the tests give: planStarts is handed its clock.

// testPool is a pool of fakes with no loop running: its tests call the
// policy themselves.
func testPool(cfg Config[*fake, string]) *Pool[*fake, string] {
	if cfg.CPUBusy == nil {
		cfg.CPUBusy = idleCPUs
	}
	p := &Pool[*fake, string]{cfg: cfg.withDefaults()}
	p.s = newState(&p.cfg, p.wake)
	return p
}

// addSet adds a set named name to p, kept for a shape of its own.
func addSet(p *Pool[*fake, string], name string, base, target int) *spareSet[*fake, string] {
	set := &spareSet[*fake, string]{name: name, spec: Spec[string]{Shape: name, Fingerprint: name}, base: base, target: target}
	p.s.sets[set.key()] = set
	return set
}

func idleCPUs() bool { return false }

// Spares start in quiet moments, within the budget and a few at a time:
// not while requests run or just after (unless one has been lacking for
// spareQuiet), never beyond Max with the conversations' processes, idle
// or busy, and never more starting at once than MaxStarting.
func TestSparesStartInQuietMoments(t *testing.T) {
	p := testPool(Config[*fake, string]{Max: 4, Spares: 1, MaxStarting: 2})
	set := addSet(p, "bot", 1, 3)
	starts := func(at time.Time) int {
		n := len(p.s.planStarts(at))
		set.pending = 0 // as if started and gone
		return n
	}
	now := time.Now()
	p.s.active = 1
	if n := starts(now); n != 0 {
		t.Errorf("%d started while a request runs", n)
	}
	if n := starts(now.Add(spareQuiet)); n != 2 {
		t.Errorf("%d started after lacking for spareQuiet, want 2 (MaxStarting)", n)
	}
	p.s.active, p.s.lastActive = 0, now.Add(spareQuiet)
	set.short = time.Time{}
	if n := starts(now.Add(spareQuiet + spareSettle/2)); n != 0 {
		t.Errorf("%d started just after a request ended", n)
	}
	if n := starts(now.Add(spareQuiet + spareSettle)); n != 2 {
		t.Errorf("%d started when quiet, want 2", n)
	}
	p.s.idle["a"], p.s.running["b"], p.s.idle["c"] = &warm[*fake]{proc: newFake()}, newFake(), &warm[*fake]{proc: newFake()}
	if n := starts(now.Add(time.Hour)); n != 1 {
		t.Errorf("%d started with three of four warm processes taken, want 1", n)
	}
}

// Nor does one start while a request's CLI starts (ColdStart), or while
// the CPUs are all wanted unless a set has lacked it for
// spareCPUPatience: the machine is busy with other work.
func TestSparesYieldToTheCPU(t *testing.T) {
	busy := true
	p := testPool(Config[*fake, string]{Max: 4, Spares: 1, CPUBusy: func() bool { return busy }})
	set := addSet(p, "bot", 1, 1)
	now := time.Now()
	if n := len(p.s.planStarts(now)); n != 0 {
		t.Errorf("%d started while the CPUs are all wanted", n)
	}
	if n := len(p.s.planStarts(now.Add(spareCPUPatience))); n != 1 {
		t.Errorf("%d started after lacking for spareCPUPatience on a busy machine, want 1", n)
	}
	set.pending = 0
	busy = false
	started := p.ColdStart() // a request's CLI starting
	if n := len(p.s.planStarts(now.Add(time.Hour))); n != 0 {
		t.Errorf("%d started while a request's CLI starts", n)
	}
	started()
	started() // once only
	if n := len(p.s.planStarts(now)); n != 1 {
		t.Errorf("%d started once the CPUs are free, want 1", n)
	}
}

// The memory spares may hold bounds their count: with room for two and
// three sets lacking one, two start, for the sets wanted most recently;
// a spare taken makes room for the set it was taken from.
func TestSpareMemoryBoundsTheCount(t *testing.T) {
	p := testPool(Config[*fake, string]{Max: 8, Spares: 1, SpareMemoryMB: 2*SpareMB + SpareMB/2})
	now := time.Now()
	var sets []*spareSet[*fake, string]
	for i, name := range []string{"a", "b", "c"} {
		set := addSet(p, name, 1, 1)
		set.lastTaken = now.Add(time.Duration(i) * time.Minute)
		sets = append(sets, set)
	}
	starts := p.s.planStarts(now.Add(time.Hour))
	if len(starts) != 2 || starts[0] != sets[2] || starts[1] != sets[1] {
		t.Fatalf("started for %v, want c and b: the two wanted last", names(starts))
	}
	if again := p.s.planStarts(now.Add(time.Hour)); len(again) != 0 {
		t.Errorf("started for %v beyond the memory", names(again))
	}
	sets[2].pending, sets[2].lastTaken = 0, now.Add(time.Hour) // c's is taken
	if again := p.s.planStarts(now.Add(time.Hour)); len(again) != 1 || again[0] != sets[2] {
		t.Errorf("started for %v, want c's replacement", names(again))
	}
}

func names(sets []*spareSet[*fake, string]) []string {
	var n []string
	for _, set := range sets {
		n = append(n, set.name)
	}
	return n
}

// The patience on a busy CPU is for a machine kept busy by other work:
// while requests of ours run and the CPUs are all wanted, those requests
// wait for them, and no spare starts however long its set lacked it.
func TestSparesOutwaitNoRequestOfOurs(t *testing.T) {
	p := testPool(Config[*fake, string]{Max: 4, Spares: 1, CPUBusy: func() bool { return true }})
	set := addSet(p, "bot", 1, 1)
	now := time.Now()
	set.short = now
	p.s.active = 1
	if n := len(p.s.planStarts(now.Add(time.Hour))); n != 0 {
		t.Errorf("%d started on busy CPUs while a request of ours runs", n)
	}
	p.s.active, p.s.lastActive = 0, now.Add(time.Hour)
	if n := len(p.s.planStarts(now.Add(time.Hour + spareSettle/2))); n != 0 {
		t.Errorf("%d started on busy CPUs just after a request of ours ended", n)
	}
	if n := len(p.s.planStarts(now.Add(time.Hour + spareSettle))); n != 1 {
		t.Errorf("%d started on CPUs busy with other work after spareCPUPatience, want 1", n)
	}
}
