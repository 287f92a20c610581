package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A small server made on a big machine for BenchmarkSmallServer: a cgroup
// with a CPU quota and a memory limit that brainbot joins before it
// starts, its CLIs with it, and whose own counters say the CPU it used,
// its peak memory and the processes the kernel killed for memory. cgroup
// v2 where the machine has it with the memory and cpu controllers, v1
// (the memory, cpu and cpuacct hierarchies) else. Making one needs root.

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupLimits is a box: cpus 0 is no quota, memory 0 no limit.
type cgroupLimits struct {
	name   string
	cpus   float64
	memory int64
}

// benchCgroup is a cgroup made for one run: one folder in v2, one in
// each of v1's memory, cpu and cpuacct hierarchies (one folder where two
// are mounted together, as "cpu,cpuacct" often is).
type benchCgroup struct {
	version int
	dirs    []string
	// memory and cpuacct are the folders with those counters (v2: the
	// one folder).
	memory, cpuacct string
}

// cgroupsMissing says why this process cannot make cgroups with memory
// and CPU limits, "" when it can.
func cgroupsMissing() string {
	if os.Geteuid() != 0 {
		return "making a cgroup of 1 CPU and 2 GB needs root (run make bench as root)"
	}
	if _, err := cgroupVersion(); err != nil {
		return err.Error()
	}
	return ""
}

// cgroupVersion is 2 where the unified hierarchy has the memory and cpu
// controllers, 1 where v1's memory, cpu and cpuacct are mounted.
func cgroupVersion() (int, error) {
	if c, err := os.ReadFile(cgroupRoot + "/cgroup.controllers"); err == nil {
		f := strings.Fields(string(c))
		if slices.Contains(f, "memory") && slices.Contains(f, "cpu") {
			return 2, nil
		}
	}
	for _, c := range []string{"memory", "cpu", "cpuacct"} {
		if _, err := os.Stat(filepath.Join(cgroupRoot, c, "cgroup.procs")); err != nil {
			return 0, fmt.Errorf("no cgroup v2 hierarchy with the memory and cpu controllers at %s, nor v1's %s hierarchy", cgroupRoot, c)
		}
	}
	return 1, nil
}

// newBenchCgroup makes a cgroup of limits l, removed when the benchmark
// or test ends (after the stack started later is closed: cleanups run
// last first).
func newBenchCgroup(b testing.TB, l cgroupLimits) *benchCgroup {
	version, err := cgroupVersion()
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("brainbot-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	cg := &benchCgroup{version: version}
	b.Cleanup(func() { cg.remove(b) })
	if version == 2 {
		cg.v2(b, name, l)
	} else {
		cg.v1(b, name, l)
	}
	return cg
}

func (cg *benchCgroup) v2(b testing.TB, name string, l cgroupLimits) {
	// The root hands the controllers down to its children.
	writeCgroup(b, cgroupRoot+"/cgroup.subtree_control", "+memory +cpu")
	dir := cg.mkdir(b, filepath.Join(cgroupRoot, name))
	cg.memory, cg.cpuacct = dir, dir
	if l.memory > 0 {
		writeCgroup(b, dir+"/memory.max", strconv.FormatInt(l.memory, 10))
		if _, err := os.Stat(dir + "/memory.swap.max"); err == nil {
			writeCgroup(b, dir+"/memory.swap.max", "0") // a server's 2 GB, not 2 GB and the machine's swap
		}
	}
	if l.cpus > 0 {
		writeCgroup(b, dir+"/cpu.max", fmt.Sprintf("%d 100000", int(l.cpus*100000)))
	}
}

func (cg *benchCgroup) v1(b testing.TB, name string, l cgroupLimits) {
	var cpu string
	for _, c := range []string{"memory", "cpu", "cpuacct"} {
		root, err := filepath.EvalSymlinks(filepath.Join(cgroupRoot, c))
		if err != nil {
			b.Fatal(err)
		}
		dir := filepath.Join(root, name)
		if !slices.Contains(cg.dirs, dir) {
			cg.mkdir(b, dir)
		}
		switch c {
		case "memory":
			cg.memory = dir
		case "cpu":
			cpu = dir
		case "cpuacct":
			cg.cpuacct = dir
		}
	}
	if l.memory > 0 {
		writeCgroup(b, cg.memory+"/memory.limit_in_bytes", strconv.FormatInt(l.memory, 10))
		if _, err := os.Stat(cg.memory + "/memory.memsw.limit_in_bytes"); err == nil {
			writeCgroup(b, cg.memory+"/memory.memsw.limit_in_bytes", strconv.FormatInt(l.memory, 10)) // no swap beyond it
		}
	}
	if l.cpus > 0 {
		writeCgroup(b, cpu+"/cpu.cfs_period_us", "100000")
		writeCgroup(b, cpu+"/cpu.cfs_quota_us", strconv.Itoa(int(l.cpus*100000)))
	}
}

func (cg *benchCgroup) mkdir(b testing.TB, dir string) string {
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatalf("cannot make a cgroup: %v", err)
	}
	cg.dirs = append(cg.dirs, dir)
	return dir
}

func writeCgroup(b testing.TB, file, value string) {
	if err := os.WriteFile(file, []byte(value), 0o644); err != nil {
		b.Fatalf("cgroup: %v", err)
	}
}

// wrap writes a program named brainbot that joins the cgroup and then
// runs brainbot, and returns its path: the stack starts it as brainbot
// (and puts its folder first on brainbot's PATH).
func (cg *benchCgroup) wrap(b testing.TB, brainbot string) string {
	script := "#!/bin/sh\n# Joins the benchmark's cgroup, then becomes brainbot.\n"
	for _, dir := range cg.dirs {
		script += fmt.Sprintf("echo $$ > %s || exit 1\n", strconv.Quote(dir+"/cgroup.procs"))
	}
	script += fmt.Sprintf("exec %s \"$@\"\n", strconv.Quote(brainbot))
	path := filepath.Join(b.TempDir(), "brainbot")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	return path
}

// cpu is the CPU every process of the cgroup used so far.
func (cg *benchCgroup) cpu(b testing.TB) time.Duration {
	if cg.version == 2 {
		return time.Duration(cgroupKey(b, cg.cpuacct+"/cpu.stat", "usage_usec")) * time.Microsecond
	}
	return time.Duration(cgroupNumber(b, cg.cpuacct+"/cpuacct.usage"))
}

// peak is the most memory the cgroup held; ok is false on a kernel that
// does not keep it (v2's memory.peak came in Linux 5.19).
func (cg *benchCgroup) peak(b testing.TB) (bytes int64, ok bool) {
	file := cg.memory + "/memory.max_usage_in_bytes"
	if cg.version == 2 {
		file = cg.memory + "/memory.peak"
	}
	if _, err := os.Stat(file); err != nil {
		return 0, false
	}
	return cgroupNumber(b, file), true
}

// oomKills is how many of the cgroup's processes the kernel killed for
// memory (v1's oom_kill needs Linux 4.13).
func (cg *benchCgroup) oomKills(b testing.TB) int64 {
	if cg.version == 2 {
		return cgroupKey(b, cg.memory+"/memory.events", "oom_kill")
	}
	return cgroupKey(b, cg.memory+"/memory.oom_control", "oom_kill")
}

// remove removes the cgroup's folders once its processes are gone.
func (cg *benchCgroup) remove(b testing.TB) {
	for _, dir := range slices.Backward(cg.dirs) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := syscall.Rmdir(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				b.Errorf("cgroup %s left: %v", dir, err)
				break
			}
			time.Sleep(50 * time.Millisecond) // its last processes exiting
		}
	}
}

func cgroupNumber(b testing.TB, file string) int64 {
	raw, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		b.Fatalf("%s: %v", file, err)
	}
	return n
}

// cgroupKey reads key's value in a file of "key value" lines.
func cgroupKey(b testing.TB, file, key string) int64 {
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), key+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				b.Fatalf("%s: %s: %v", file, key, err)
			}
			return n
		}
	}
	b.Fatalf("%s: no %s", file, key)
	return 0
}
