package sysmem

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strings"
)

// cgroupRoot is where cgroup hierarchies are mounted: v2's unified one
// at the root itself, v1's memory controller at memory/ under it.
const cgroupRoot = "sys/fs/cgroup"

// noLimit is the least a v1 limit reads when none is set (the kernel's
// PAGE_COUNTER_MAX in bytes, 9223372036854771712 on 64-bit).
const noLimit = 1 << 60

// limitingCgroup is the lowest memory limit of the cgroups from this
// process's own up to the root, v2 or v1, and ok false where none limits.
// A parent's limit binds its children: systemd's MemoryMax on a slice
// leaves the service's own memory.max at "max".
func (b Box) limitingCgroup() (l Limit, ok bool) {
	raw, err := fs.ReadFile(b.fsys, "proc/self/cgroup")
	if err != nil {
		return Limit{}, false
	}
	lines := bufio.NewScanner(bytes.NewReader(raw))
	for lines.Scan() {
		// hierarchy-id:controllers:path; v2's is "0::/path".
		parts := strings.SplitN(lines.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var c Limit
		var found bool
		switch {
		case parts[0] == "0" && parts[1] == "":
			c, found = b.lowestLimit(cgroupRoot, parts[2], "memory.max", 2)
		case strings.Contains(","+parts[1]+",", ",memory,"):
			c, found = b.lowestLimit(cgroupRoot+"/memory", parts[2], "memory.limit_in_bytes", 1)
		}
		if found && (!ok || c.Bytes < l.Bytes) {
			l, ok = c, true
		}
	}
	return l, ok
}

// lowestLimit walks from the cgroup at mount/cgroup up to mount and
// returns the lowest limit file it finds set. A hierarchy mounted
// elsewhere, or without the memory controller (v2 on a v1 host: its root
// has no memory.max), has none.
func (b Box) lowestLimit(mount, cgroup, file string, version int) (l Limit, ok bool) {
	for dir := path.Join(mount, cgroup); ; dir = path.Dir(dir) {
		n, err := b.number(dir + "/" + file)
		if err == nil && n < noLimit && (!ok || n < l.Bytes) {
			l, ok = Limit{Bytes: n, File: "/" + dir + "/" + file, Cgroup: dir, Version: version}, true
		}
		if dir == mount || !strings.HasPrefix(dir, mount+"/") {
			return l, ok
		}
	}
}
