package pool

import (
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"brainbot/syscpu"
)

// The CPUs count as all wanted when, since the gauge's last look, some
// runnable thread waited for one more than cpuStallShare of the time
// (/proc/pressure/cpu): a reading of the runnable threads at one instant
// finds a free CPU now and then on CPUs busy most of the time. A first
// look, or one after cpuStale, says busy and measures from then on; looks
// closer than cpuWindow keep the last verdict; without pressure stall
// information, the runnable threads now (/proc/loadavg) decide.
func TestCPUGaugeReadsTheStallsSinceItsLastLook(t *testing.T) {
	var stalls uint64
	var psiErr error
	loadavg := "0.10 0.20 0.30 1/182 18860\n" // a free CPU at each instant
	g := &cpuGauge{cpus: 2,
		stalls:  func() (uint64, error) { return stalls, psiErr },
		loadavg: func() (string, error) { return loadavg, nil }}
	now := time.Now()
	for _, look := range []struct {
		after time.Duration
		total uint64
		busy  bool
		why   string
	}{
		{0, 9_702_145_572, true, "a first look"},
		{time.Second, 9_702_145_572 + 600_000, true, "60% of a second stalled"},
		{time.Second + cpuWindow/2, 9_702_145_572 + 650_000, true, "a look closer than cpuWindow"},
		{2 * time.Second, 9_702_145_572 + 650_000, false, "5% of a second stalled"},
		{2*time.Second + cpuStale + time.Second, 9_702_145_572 + 650_000, true, "a look long after the last"},
		{3*time.Second + cpuStale + time.Second, 9_702_145_572 + 660_000, false, "1% of a second stalled"},
	} {
		stalls = look.total
		if got := g.contended(now.Add(look.after)); got != look.busy {
			t.Errorf("%s: contended %v, want %v", look.why, got, look.busy)
		}
	}
	psiErr = errors.New("no pressure stall information")
	loadavg = "7.30 9.51 9.55 5/182 18860\n"
	if !g.contended(now.Add(time.Hour)) {
		t.Error("free CPUs without pressure stall information, 4 threads runnable on 2 CPUs")
	}
}

// Without pressure stall information the gauge counts the threads
// runnable now (/proc/loadavg's fourth field) against the CPUs, the
// reader aside.
func TestRunnableOver(t *testing.T) {
	for line, want := range map[string]bool{
		"7.30 9.51 9.55 5/182 18860\n": true, // 4 runnable besides the reader, on 2 CPUs
		"0.10 0.20 0.30 3/182 18860\n": false,
		"garbage":                      false,
	} {
		if got := runnableOver(line, 2); got != want {
			t.Errorf("runnableOver(%q, 2) = %v, want %v", line, got, want)
		}
	}
}

// In a container throttled to one CPU on an 8-CPU host, the gauge
// counts one CPU and reads the stalls of brainbot's own cgroup, which
// count the throttling, not the quiet host's.
func TestCPUGaugeReadsTheBox(t *testing.T) {
	box := syscpu.New(fstest.MapFS{
		"proc/self/cgroup":                                    {Data: []byte("0::/system.slice/brainbot.service\n")},
		"proc/pressure/cpu":                                   {Data: []byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=120034\n")},
		"sys/fs/cgroup/system.slice/cpu.max":                  {Data: []byte("100000 100000\n")},
		"sys/fs/cgroup/system.slice/brainbot.service/cpu.max": {Data: []byte("max 100000\n")},
		"sys/fs/cgroup/system.slice/brainbot.service/cpu.pressure": {
			Data: []byte("some avg10=40.02 avg60=29.80 avg300=12.31 total=91200455\nfull avg10=38.50 avg60=27.71 avg300=11.62 total=88020117\n")},
	}, 8)
	g := newCPUGauge(box)
	if g.cpus != 1 {
		t.Errorf("the gauge counts %d CPUs, want the quota's 1", g.cpus)
	}
	if total, err := g.stalls(); err != nil || total != 91200455 {
		t.Errorf("stalls %d, %v; want the cgroup's 91200455", total, err)
	}
}
