// Package cgroup finds the cgroups of this process under a root file
// system, as /proc/self/cgroup lists them, and reads the kernel's
// pressure files, for the packages that read the box brainbot runs on
// (sysmem, syscpu). Paths are those of an fs.FS rooted at "/": without
// the leading slash.
package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Root is where cgroup hierarchies are mounted: v2's unified one at Root
// itself, each of v1's at a folder named by its controllers under it
// ("memory", "cpu,cpuacct").
const Root = "sys/fs/cgroup"

// Hierarchy is one line of /proc/self/cgroup: a hierarchy this process
// is in, and its cgroup there.
type Hierarchy struct {
	// Version is 2 for the unified hierarchy, 1 for a v1 one.
	Version int
	// Controllers are a v1 hierarchy's ("cpu", "cpuacct"), none for v2.
	Controllers []string
	// Path is the cgroup's path in the hierarchy: "/system.slice/brainbot.service".
	Path string
}

// Self reads the hierarchies this process is in from fsys's
// /proc/self/cgroup.
func Self(fsys fs.FS) ([]Hierarchy, error) {
	raw, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var hs []Hierarchy
	for line := range strings.Lines(string(raw)) {
		// hierarchy-id:controllers:path; v2's is "0::/path".
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		h := Hierarchy{Version: 1, Path: parts[2]}
		if parts[0] == "0" && parts[1] == "" {
			h.Version = 2
		} else {
			h.Controllers = strings.Split(parts[1], ",")
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// Has reports whether the hierarchy is a v1 one of controller.
func (h Hierarchy) Has(controller string) bool {
	return slices.Contains(h.Controllers, controller)
}

// Mount is the hierarchy's folder under the root file system: Root for
// v2, the folder named by its controllers under Root for v1 (as systemd
// and container runtimes mount them).
func (h Hierarchy) Mount() string {
	if h.Version == 2 {
		return Root
	}
	return Root + "/" + strings.Join(h.Controllers, ",")
}

// Dir is the folder of this process's cgroup in the hierarchy.
func (h Hierarchy) Dir() string { return path.Join(h.Mount(), h.Path) }

// Up yields the folders from this process's cgroup up to the
// hierarchy's mount, the cgroup's first: a parent's limit binds its
// children. In a container whose hierarchy is mounted at its own cgroup,
// the folders of the host's path are not there, and the mount is the
// container's cgroup.
func (h Hierarchy) Up() iter.Seq[string] {
	mount := h.Mount()
	return func(yield func(string) bool) {
		for dir := h.Dir(); ; dir = path.Dir(dir) {
			if !yield(dir) || dir == mount || !strings.HasPrefix(dir, mount+"/") {
				return
			}
		}
	}
}

// Pressure is the "some" line of a pressure file (/proc/pressure/cpu, a
// v2 cgroup's cpu.pressure or memory.pressure): how long some task
// stalled for the resource.
type Pressure struct {
	// Avg10 is the share of the last 10 s, in percent.
	Avg10 float64
	// Total is the microseconds so far.
	Total uint64
}

// ReadPressure reads the "some" line of the pressure file name.
func ReadPressure(fsys fs.FS, name string) (Pressure, error) {
	raw, err := fs.ReadFile(fsys, name)
	if err != nil {
		return Pressure{}, fmt.Errorf("cgroup: %w", err)
	}
	for line := range bytes.Lines(raw) {
		fields := strings.Fields(string(line))
		if len(fields) == 0 || fields[0] != "some" {
			continue
		}
		return parseSome(fields[1:])
	}
	return Pressure{}, fmt.Errorf("cgroup: no stalls of some tasks in /%s", name)
}

// parseSome reads the fields of a "some" line: avg10=0.12 avg60=...
// total=N.
func parseSome(fields []string) (Pressure, error) {
	var p Pressure
	var avg, total bool
	for _, f := range fields {
		key, value, _ := strings.Cut(f, "=")
		var err error
		switch key {
		case "avg10":
			p.Avg10, err = strconv.ParseFloat(value, 64)
			avg = true
		case "total":
			p.Total, err = strconv.ParseUint(value, 10, 64)
			total = true
		}
		if err != nil {
			return Pressure{}, fmt.Errorf("cgroup: %s: %w", f, err)
		}
	}
	if !avg || !total {
		return Pressure{}, errors.New("cgroup: a pressure line without avg10 or total")
	}
	return p, nil
}
