// Package sysmem reads the memory of the box brainbot runs on, as Linux
// reports it: how much the box has for brainbot (the machine's, or its
// cgroup's limit where lower), how much of it is in use now, whether the
// kernel stalls for memory, and what one process holds of its own. The
// pool of kept CLI processes budgets by these numbers, and doctor shows
// them to an admin.
//
// Every number comes from files under a root file system (Box), so that
// tests read trees shaped like real cgroup v1 and v2 hosts.
package sysmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"brainbot/internal/cgroup"
)

// Box reads the memory files of one root file system: /proc and
// /sys/fs/cgroup under it.
type Box struct {
	fsys fs.FS
}

// New reads the files of fsys, a root file system (paths without the
// leading slash: "proc/meminfo").
func New(fsys fs.FS) Box { return Box{fsys: fsys} }

// Host reads this machine's files.
func Host() Box { return New(os.DirFS("/")) }

// Limit is the memory the box has for brainbot, and where that number
// comes from.
type Limit struct {
	// Bytes is the memory: the lowest cgroup limit on the way from
	// brainbot's cgroup to the root, or MemTotal where no cgroup limits
	// below it.
	Bytes int64
	// File is the file it was read from, as an absolute path:
	// "/proc/meminfo", "/sys/fs/cgroup/system.slice/brainbot.service/memory.max".
	File string
	// Cgroup is the limiting cgroup's folder under the root
	// ("sys/fs/cgroup/memory/brainbot" for v1), "" for the machine's
	// memory; Version its cgroup version, 1 or 2 (0 for the machine's).
	Cgroup  string
	Version int
}

// Where says what the limit is, for an admin: "memory", or "the cgroup's
// memory limit".
func (l Limit) Where() string {
	if l.Cgroup == "" {
		return "memory"
	}
	return "the cgroup's memory limit"
}

// Limit is the memory the box has for brainbot: MemTotal, or the limit of
// brainbot's memory cgroup (v2 memory.max, v1 memory.limit_in_bytes, or
// of a cgroup above it) where lower.
func (b Box) Limit() (Limit, error) {
	meminfo, err := b.keyed("proc/meminfo")
	if err != nil {
		return Limit{}, err
	}
	total, ok := meminfo["MemTotal"]
	if !ok {
		return Limit{}, errors.New("sysmem: no MemTotal in /proc/meminfo")
	}
	l := Limit{Bytes: total, File: "/proc/meminfo"}
	if c, ok := b.limitingCgroup(); ok && c.Bytes < l.Bytes {
		l = c
	}
	return l, nil
}

// Usage is the memory in use now where the limit applies, in bytes, less
// the file cache the kernel drops first when it runs short (inactive
// file pages): in the limiting cgroup, v2 memory.current or v1
// memory.usage_in_bytes less memory.stat's inactive file; on the
// machine, MemTotal less MemAvailable.
func (b Box) Usage(l Limit) (int64, error) {
	switch l.Version {
	case 2:
		return b.cgroupUsage(l.Cgroup, "memory.current", "inactive_file")
	case 1:
		return b.cgroupUsage(l.Cgroup, "memory.usage_in_bytes", "total_inactive_file")
	}
	meminfo, err := b.keyed("proc/meminfo")
	if err != nil {
		return 0, err
	}
	available, ok := meminfo["MemAvailable"]
	if !ok {
		return 0, errors.New("sysmem: no MemAvailable in /proc/meminfo")
	}
	return meminfo["MemTotal"] - available, nil
}

func (b Box) cgroupUsage(dir, usageFile, inactiveKey string) (int64, error) {
	usage, err := b.number(dir + "/" + usageFile)
	if err != nil {
		return 0, err
	}
	stat, err := b.keyed(dir + "/memory.stat")
	if err != nil {
		return 0, err
	}
	return max(0, usage-stat[inactiveKey]), nil
}

// Pressure is the share of the last 10 s in which some of brainbot's
// tasks stalled waiting for memory, in percent (PSI's "some avg10"): of
// the limiting v2 cgroup (memory.pressure), else of the machine
// (/proc/pressure/memory). ok is false where the kernel keeps no such
// count.
func (b Box) Pressure(l Limit) (percent float64, ok bool) {
	file := "proc/pressure/memory"
	if l.Version == 2 {
		if _, err := fs.Stat(b.fsys, l.Cgroup+"/memory.pressure"); err == nil {
			file = l.Cgroup + "/memory.pressure"
		}
	}
	p, err := cgroup.ReadPressure(b.fsys, file)
	if err != nil {
		return 0, false
	}
	return p.Avg10, true
}

// keyed reads a file of "Key: N kB" lines (/proc/meminfo, smaps_rollup)
// or of "key N" lines (memory.stat), in bytes where a unit says kB.
func (b Box) keyed(name string) (map[string]int64, error) {
	raw, err := fs.ReadFile(b.fsys, name)
	if err != nil {
		return nil, fmt.Errorf("sysmem: %w", err)
	}
	values := map[string]int64{}
	lines := bufio.NewScanner(bytes.NewReader(raw))
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 2 {
			continue
		}
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 2 && fields[2] == "kB" {
			n <<= 10
		}
		values[strings.TrimSuffix(fields[0], ":")] = n
	}
	return values, nil
}

// number reads a file holding one number; "max" (v2's no limit) is
// errNoLimit.
func (b Box) number(name string) (int64, error) {
	raw, err := fs.ReadFile(b.fsys, name)
	if err != nil {
		return 0, fmt.Errorf("sysmem: %w", err)
	}
	s := strings.TrimSpace(string(raw))
	if s == "max" {
		return 0, errNoLimit
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sysmem: /%s: %w", name, err)
	}
	return n, nil
}

var errNoLimit = errors.New("sysmem: no limit")
