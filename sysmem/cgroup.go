package sysmem

import "brainbot/internal/cgroup"

// noLimit is the least a v1 limit reads when none is set (the kernel's
// PAGE_COUNTER_MAX in bytes, 9223372036854771712 on 64-bit).
const noLimit = 1 << 60

// limitingCgroup is the lowest memory limit of the cgroups from this
// process's own up to the root, v2 or v1, and ok false where none limits.
// A parent's limit binds its children: systemd's MemoryMax on a slice
// leaves the service's own memory.max at "max".
func (b Box) limitingCgroup() (l Limit, ok bool) {
	hierarchies, err := cgroup.Self(b.fsys)
	if err != nil {
		return Limit{}, false
	}
	for _, h := range hierarchies {
		var c Limit
		var found bool
		switch {
		case h.Version == 2:
			c, found = b.lowestLimit(h, "memory.max")
		case h.Has("memory"):
			c, found = b.lowestLimit(h, "memory.limit_in_bytes")
		}
		if found && (!ok || c.Bytes < l.Bytes) {
			l, ok = c, true
		}
	}
	return l, ok
}

// lowestLimit returns the lowest limit file set from the cgroup of h up
// to its mount. A hierarchy mounted elsewhere, or without the memory
// controller (v2 on a v1 host: its root has no memory.max), has none.
func (b Box) lowestLimit(h cgroup.Hierarchy, file string) (l Limit, ok bool) {
	for dir := range h.Up() {
		n, err := b.number(dir + "/" + file)
		if err == nil && n < noLimit && (!ok || n < l.Bytes) {
			l, ok = Limit{Bytes: n, File: "/" + dir + "/" + file, Cgroup: dir, Version: h.Version}, true
		}
	}
	return l, ok
}
