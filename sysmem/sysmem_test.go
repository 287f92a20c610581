package sysmem

import (
	"os"
	"testing"
	"testing/fstest"
)

const memTotal = 24559996 << 10 // testdata's MemTotal

// A host like this project's test machine: cgroup v1 controllers, and
// brainbot in a memory cgroup limited to 2 GiB.
func TestCgroupV1(t *testing.T) {
	box := New(os.DirFS("testdata/v1"))
	l, err := box.Limit()
	want := Limit{Bytes: 2 << 30, File: "/sys/fs/cgroup/memory/brainbot-small/memory.limit_in_bytes",
		Cgroup: "sys/fs/cgroup/memory/brainbot-small", Version: 1}
	if err != nil || l != want {
		t.Fatalf("Limit() = %+v, %v; want %+v", l, err, want)
	}
	if l.Where() != "the cgroup's memory limit" {
		t.Errorf("Where() = %q", l.Where())
	}
	// memory.usage_in_bytes less total_inactive_file.
	if used, err := box.Usage(l); err != nil || used != 600_000_000 {
		t.Errorf("Usage() = %d, %v; want 600000000", used, err)
	}
	// No memory.pressure in v1: the machine's.
	if pct, ok := box.Pressure(l); !ok || pct != 1.5 {
		t.Errorf("Pressure() = %v, %v; want 1.5, true", pct, ok)
	}
}

// A systemd host on cgroup v2 whose slice has MemoryMax=1G: the
// service's own memory.max says max, the slice's binds.
func TestCgroupV2LimitAbove(t *testing.T) {
	box := New(os.DirFS("testdata/v2"))
	l, err := box.Limit()
	want := Limit{Bytes: 1 << 30, File: "/sys/fs/cgroup/system.slice/memory.max", Cgroup: "sys/fs/cgroup/system.slice", Version: 2}
	if err != nil || l != want {
		t.Fatalf("Limit() = %+v, %v; want %+v", l, err, want)
	}
	// memory.current less inactive_file, of the slice.
	if used, err := box.Usage(l); err != nil || used != 450_000_000 {
		t.Errorf("Usage() = %d, %v; want 450000000", used, err)
	}
	// The cgroup's own stalls, not the machine's.
	if pct, ok := box.Pressure(l); !ok || pct != 12.34 {
		t.Errorf("Pressure() = %v, %v; want 12.34, true", pct, ok)
	}
}

// No limit on the way up: the machine's memory, and what it has in use;
// a kernel without PSI says nothing of stalls.
func TestNoLimit(t *testing.T) {
	box := New(os.DirFS("testdata/nolimit"))
	l, err := box.Limit()
	if want := (Limit{Bytes: memTotal, File: "/proc/meminfo"}); err != nil || l != want {
		t.Fatalf("Limit() = %+v, %v; want %+v", l, err, want)
	}
	if l.Where() != "memory" {
		t.Errorf("Where() = %q", l.Where())
	}
	if used, err := box.Usage(l); err != nil || used != (24559996-20000000)<<10 {
		t.Errorf("Usage() = %d, %v; want MemTotal-MemAvailable", used, err)
	}
	if pct, ok := box.Pressure(l); ok {
		t.Errorf("Pressure() = %v, true; want unknown", pct)
	}
}

// A limit above the machine's memory is no limit.
func TestLimitAboveMemory(t *testing.T) {
	meminfo := &fstest.MapFile{Data: []byte("MemTotal:        2000000 kB\nMemAvailable:    1000000 kB\n")}
	box := New(fstest.MapFS{
		"proc/meminfo":                 meminfo,
		"proc/self/cgroup":             {Data: []byte("0::/bot\n")},
		"sys/fs/cgroup/bot/memory.max": {Data: []byte("8589934592\n")},
	})
	if l, err := box.Limit(); err != nil || l.Bytes != 2000000<<10 || l.Cgroup != "" {
		t.Errorf("Limit() = %+v, %v; want MemTotal", l, err)
	}
	if _, err := New(fstest.MapFS{}).Limit(); err == nil {
		t.Error("Limit() without /proc/meminfo: no error")
	}
}

// An idle Claude CLI beside others: its own memory is what it wrote,
// not the executable's pages the others map too.
func TestProcess(t *testing.T) {
	box := New(os.DirFS("testdata/v1"))
	p, err := box.Process(4242)
	want := Process{Rss: 153600 << 10, Pss: 108544 << 10, SharedClean: 66560 << 10, PrivateDirty: 87040 << 10}
	if err != nil || p != want {
		t.Fatalf("Process(4242) = %+v, %v; want %+v", p, err, want)
	}
	if p.Own() != 87040<<10 {
		t.Errorf("Own() = %d, want Private_Dirty", p.Own())
	}
	if rss, err := box.Resident(4242); err != nil || rss != p.Rss {
		t.Errorf("Resident(4242) = %d, %v; want VmRSS, %d", rss, err, p.Rss)
	}
	if _, err := box.Resident(1); err == nil {
		t.Error("Resident(1) of no such process: no error")
	}
	if _, err := box.Process(1); err == nil {
		t.Error("Process(1) of no such process: no error")
	}
}

// On this machine: a limit, a usage within it, and this process's own
// memory.
func TestHost(t *testing.T) {
	box := Host()
	l, err := box.Limit()
	if err != nil || l.Bytes <= 0 {
		t.Fatalf("Limit() = %+v, %v", l, err)
	}
	if used, err := box.Usage(l); err != nil || used <= 0 || used > l.Bytes {
		t.Errorf("Usage() = %d, %v; want within %d", used, err, l.Bytes)
	}
	if p, err := box.Process(os.Getpid()); err != nil || p.Own() <= 0 || p.Rss < p.Own() {
		t.Errorf("Process(self) = %+v, %v", p, err)
	}
}
