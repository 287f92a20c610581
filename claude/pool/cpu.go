package pool

import (
	"os"
	"strconv"
	"strings"
	"time"

	"brainbot/syscpu"
)

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
// keeps pressure stall information (brainbot's cgroup's cpu.pressure,
// else /proc/pressure/cpu), whether some runnable thread waited for a CPU
// more than cpuStallShare of the time since the gauge's last look. A
// first look, or one long after the last, says busy and measures from
// then on (tend looks again within a tick); looks closer than cpuWindow
// keep the last verdict. Elsewhere, whether more threads are runnable
// than brainbot's CPUs now (/proc/loadavg). The stalls over a window are
// what counts: a reading at one instant finds a CPU free now and then on
// CPUs busy most of the time, and a spare started then takes the CPU
// from the requests waiting for it.
type cpuGauge struct {
	// stalls is the microseconds so far in which some thread waited for a
	// CPU; loadavg reads /proc/loadavg; cpus is how many brainbot may use
	// (a cgroup's quota where lower than the machine's).
	stalls  func() (uint64, error)
	loadavg func() (string, error)
	cpus    int
	// at is the gauge's last look at the stalls, total their count then,
	// busy its verdict.
	at    time.Time
	total uint64
	busy  bool
}

// newCPUGauge reads the CPUs and stalls of box (syscpu: a quota of
// brainbot's cgroup, the stalls of its tasks), and this machine's
// /proc/loadavg.
func newCPUGauge(box syscpu.Box) *cpuGauge {
	return &cpuGauge{cpus: box.CPUs().N, stalls: box.Stalls,
		loadavg: func() (string, error) {
			b, err := os.ReadFile("/proc/loadavg")
			return string(b), err
		}}
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
