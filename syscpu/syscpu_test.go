package syscpu

import (
	"os"
	"runtime"
	"testing"
	"testing/fstest"
)

// A cgroup v1 host, cpu and cpuacct mounted together, and brainbot in a
// cgroup with a quota of one CPU on an 8-CPU machine; its PSI is the
// machine's alone.
func TestCgroupV1(t *testing.T) {
	box := New(os.DirFS("testdata/v1"), 8)
	want := CPUs{N: 1, Quota: 1, File: "/sys/fs/cgroup/cpu,cpuacct/brainbot/cpu.cfs_quota_us"}
	if c := box.CPUs(); c != want {
		t.Fatalf("CPUs() = %+v, want %+v", c, want)
	}
	if w := box.CPUs().Where(); w != "a quota of 1 CPU, /sys/fs/cgroup/cpu,cpuacct/brainbot/cpu.cfs_quota_us" {
		t.Errorf("Where() = %q", w)
	}
	if total, err := box.Stalls(); err != nil || total != 5617715734 {
		t.Errorf("Stalls() = %d, %v; want /proc/pressure/cpu's 5617715734", total, err)
	}
}

// A systemd host on cgroup v2 whose slice has CPUQuota=150%: the
// service's own cpu.max says max, the slice's binds, rounded up to two
// CPUs; the stalls are the service's own, its throttling counted, not
// the quiet machine's.
func TestCgroupV2QuotaAbove(t *testing.T) {
	box := New(os.DirFS("testdata/v2"), 8)
	want := CPUs{N: 2, Quota: 1.5, File: "/sys/fs/cgroup/system.slice/cpu.max"}
	if c := box.CPUs(); c != want {
		t.Fatalf("CPUs() = %+v, want %+v", c, want)
	}
	if w := box.CPUs().Where(); w != "a quota of 1.5 CPUs, /sys/fs/cgroup/system.slice/cpu.max" {
		t.Errorf("Where() = %q", w)
	}
	if total, err := box.Stalls(); err != nil || total != 91200455 {
		t.Errorf("Stalls() = %d, %v; want the service's cpu.pressure's 91200455", total, err)
	}
}

// No quota on the way up: the CPUs the process may run on; a kernel
// without PSI keeps no stalls.
func TestNoLimit(t *testing.T) {
	box := New(os.DirFS("testdata/nolimit"), 2)
	if c := box.CPUs(); c != (CPUs{N: 2}) || c.Where() != "this machine" {
		t.Errorf("CPUs() = %+v, %q; want 2 of this machine", c, c.Where())
	}
	if total, err := box.Stalls(); err == nil {
		t.Errorf("Stalls() = %d without PSI: no error", total)
	}
}

// A quota above the CPUs the process may run on is no limit; the
// tightest of several binds, whatever its depth; at least one CPU.
func TestQuotas(t *testing.T) {
	for _, c := range []struct {
		why      string
		files    fstest.MapFS
		affinity int
		want     CPUs
	}{
		{"a quota above the machine", fstest.MapFS{
			"proc/self/cgroup":          {Data: []byte("0::/bot\n")},
			"sys/fs/cgroup/bot/cpu.max": {Data: []byte("400000 100000\n")},
		}, 2, CPUs{N: 2}},
		{"the service's own quota below its slice's", fstest.MapFS{
			"proc/self/cgroup":                               {Data: []byte("0::/system.slice/bot.service\n")},
			"sys/fs/cgroup/system.slice/cpu.max":             {Data: []byte("300000 100000\n")},
			"sys/fs/cgroup/system.slice/bot.service/cpu.max": {Data: []byte("50000 100000\n")},
		}, 8, CPUs{N: 1, Quota: 0.5, File: "/sys/fs/cgroup/system.slice/bot.service/cpu.max"}},
		// Docker on v1 mounts the container's own cgroup at the
		// hierarchy's folder: the host's path is not there.
		{"a v1 container, --cpus=2", fstest.MapFS{
			"proc/self/cgroup":                            {Data: []byte("4:cpu,cpuacct:/docker/0f3a9c\n3:memory:/docker/0f3a9c\n")},
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  {Data: []byte("200000\n")},
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": {Data: []byte("100000\n")},
		}, 8, CPUs{N: 2, Quota: 2, File: "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"}},
		{"no /proc/self/cgroup", fstest.MapFS{}, 4, CPUs{N: 4}},
		{"no CPU at all", fstest.MapFS{}, 0, CPUs{N: 1}},
	} {
		if got := New(c.files, c.affinity).CPUs(); got != c.want {
			t.Errorf("%s: CPUs() = %+v, want %+v", c.why, got, c.want)
		}
	}
}

// On v2 without cpu.pressure in the cgroup (a kernel without PSI for
// cgroups), the machine's stalls.
func TestStallsOfTheMachine(t *testing.T) {
	box := New(fstest.MapFS{
		"proc/self/cgroup":          {Data: []byte("0::/bot\n")},
		"proc/pressure/cpu":         {Data: []byte("some avg10=1.00 avg60=0.50 avg300=0.10 total=777\n")},
		"sys/fs/cgroup/bot/cpu.max": {Data: []byte("max 100000\n")},
	}, 2)
	if total, err := box.Stalls(); err != nil || total != 777 {
		t.Errorf("Stalls() = %d, %v; want 777", total, err)
	}
}

// On this machine: at least one CPU, at most those it may run on.
func TestHost(t *testing.T) {
	if c := Host().CPUs(); c.N < 1 || c.N > runtime.NumCPU() {
		t.Errorf("CPUs() = %+v on %d CPUs", c, runtime.NumCPU())
	}
}
