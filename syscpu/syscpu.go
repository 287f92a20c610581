// Package syscpu reads the CPUs of the box brainbot runs on, as Linux
// reports them: how many this process may use (the CPUs it may run on,
// or its cgroup's CPU quota where lower), and how long its tasks waited
// for one. The pool of kept CLI processes starts its spares by these
// numbers, and doctor shows them to an admin.
//
// Every number comes from files under a root file system (Box), so that
// tests read trees shaped like real cgroup v1 and v2 hosts.
package syscpu

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"

	"brainbot/internal/cgroup"
)

// Box reads the CPU files of one root file system: /proc and
// /sys/fs/cgroup under it.
type Box struct {
	fsys fs.FS
	// affinity is how many CPUs this process may run on.
	affinity int
}

// New reads the files of fsys, a root file system (paths without the
// leading slash: "proc/self/cgroup"), for a process that may run on
// affinity CPUs.
func New(fsys fs.FS, affinity int) Box { return Box{fsys: fsys, affinity: affinity} }

// Host reads this machine's files, for this process: runtime.NumCPU is
// the CPUs its affinity mask allows.
func Host() Box { return New(os.DirFS("/"), runtime.NumCPU()) }

// CPUs is how many CPUs brainbot may use, and where that number comes
// from.
type CPUs struct {
	// N is the CPUs: those this process may run on, or its cgroup's quota
	// rounded up where lower; at least 1.
	N int
	// Quota is the CPUs the limiting quota allows (1.5 for "150000
	// 100000"), 0 where the machine's count stands.
	Quota float64
	// File is the quota's file, as an absolute path:
	// "/sys/fs/cgroup/system.slice/cpu.max"; "" for the machine's.
	File string
}

// Where says where the number comes from, for an admin: "this machine",
// or "a quota of 1.5 CPUs, /sys/fs/cgroup/system.slice/cpu.max".
func (c CPUs) Where() string {
	if c.File == "" {
		return "this machine"
	}
	unit := " CPUs"
	if c.Quota == 1 {
		unit = " CPU"
	}
	return "a quota of " + strconv.FormatFloat(c.Quota, 'f', -1, 64) + unit + ", " + c.File
}

// CPUs is how many CPUs brainbot may use: those it may run on, or the
// tightest CPU quota of the cgroups from its own up to the root (v2
// cpu.max, v1 cpu.cfs_quota_us over cpu.cfs_period_us) where lower,
// rounded up: a quota of 1.5 CPUs runs two threads at once, only not
// all the time.
func (b Box) CPUs() CPUs {
	c := CPUs{N: max(1, b.affinity)}
	if q, file, ok := b.tightestQuota(); ok && quotaCPUs(q) <= c.N {
		c = CPUs{N: quotaCPUs(q), Quota: q, File: file}
	}
	return c
}

func quotaCPUs(quota float64) int { return max(1, int(math.Ceil(quota))) }

// tightestQuota is the lowest CPU quota of the cgroups from this
// process's own up to the root, in CPUs, and the file it is in; ok false
// where none limits. A parent's quota binds its children: systemd's
// CPUQuota on a slice leaves the service's own cpu.max at "max".
func (b Box) tightestQuota() (quota float64, file string, ok bool) {
	hierarchies, err := cgroup.Self(b.fsys)
	if err != nil {
		return 0, "", false
	}
	for _, h := range hierarchies {
		if h.Version != 2 && !h.Has("cpu") {
			continue
		}
		for dir := range h.Up() {
			q, f, found := b.quota(h.Version, dir)
			if found && (!ok || q < quota) {
				quota, file, ok = q, f, true
			}
		}
	}
	return quota, file, ok
}

// quota reads the CPU quota of the cgroup dir, in CPUs: v2's cpu.max
// ("150000 100000"; "max 100000" sets none), v1's cpu.cfs_quota_us (-1
// sets none) over cpu.cfs_period_us.
func (b Box) quota(version int, dir string) (cpus float64, file string, ok bool) {
	var quota, period string
	if version == 2 {
		file = dir + "/cpu.max"
		raw, err := fs.ReadFile(b.fsys, file)
		if err != nil {
			return 0, "", false
		}
		quota, period, _ = strings.Cut(strings.TrimSpace(string(raw)), " ")
	} else {
		file = dir + "/cpu.cfs_quota_us"
		q, errQ := fs.ReadFile(b.fsys, file)
		p, errP := fs.ReadFile(b.fsys, dir+"/cpu.cfs_period_us")
		if errQ != nil || errP != nil {
			return 0, "", false
		}
		quota, period = strings.TrimSpace(string(q)), strings.TrimSpace(string(p))
	}
	q, errQ := strconv.ParseInt(quota, 10, 64)
	p, errP := strconv.ParseInt(period, 10, 64)
	if errQ != nil || errP != nil || q <= 0 || p <= 0 {
		return 0, "", false
	}
	return float64(q) / float64(p), "/" + file, true
}

// Stalls is the microseconds so far in which some of brainbot's tasks
// waited for a CPU (PSI's "some total"): of its own v2 cgroup
// (cpu.pressure, which counts the time its quota held them back), else
// of the machine (/proc/pressure/cpu). It is an error where the kernel
// keeps no such count.
func (b Box) Stalls() (uint64, error) {
	p, err := cgroup.ReadPressure(b.fsys, b.pressureFile())
	if err != nil {
		return 0, fmt.Errorf("syscpu: %w", err)
	}
	return p.Total, nil
}

// pressureFile is brainbot's own v2 cgroup's cpu.pressure where it is
// there (not on v1 hosts, nor on kernels without PSI), else the
// machine's.
func (b Box) pressureFile() string {
	hierarchies, _ := cgroup.Self(b.fsys)
	for _, h := range hierarchies {
		if h.Version != 2 {
			continue
		}
		if file := h.Dir() + "/cpu.pressure"; exists(b.fsys, file) {
			return file
		}
	}
	return "proc/pressure/cpu"
}

func exists(fsys fs.FS, name string) bool {
	_, err := fs.Stat(fsys, name)
	return err == nil
}
