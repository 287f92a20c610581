package sysmem

import (
	"fmt"
	"strconv"
)

// Process is what one process holds, in bytes, from
// /proc/PID/smaps_rollup.
type Process struct {
	// Rss is every page resident, its own and those it shares.
	Rss int64
	// Pss is its proportional share: each shared page divided among the
	// processes that map it.
	Pss int64
	// SharedClean are pages other processes map too, unmodified: for a
	// Claude CLI, the executable's (about 65 MB, the same pages for every
	// CLI).
	SharedClean int64
	// PrivateClean and PrivateDirty are pages no other process maps.
	// A process alone on its executable has that executable's pages as
	// private clean ones; PrivateDirty is what it wrote itself.
	PrivateClean, PrivateDirty int64
	// Swap is what of its own is swapped out.
	Swap int64
}

// Own is the memory the process adds to the box, the memory ending it
// frees: the pages it wrote itself (private dirty), and its swapped ones.
// Its clean pages are the executable's, which another process of the
// same program shares or the kernel reads again from the file.
func (p Process) Own() int64 { return p.PrivateDirty + p.Swap }

// Resident is the memory process pid has resident (VmRSS of
// /proc/PID/status), in bytes: its own pages and those it shares. A
// cheaper read than Process (smaps_rollup walks every mapping), for a
// check on each request.
func (b Box) Resident(pid int) (int64, error) {
	v, err := b.keyed("proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	rss, ok := v["VmRSS"]
	if !ok {
		return 0, fmt.Errorf("sysmem: no VmRSS in /proc/%d/status", pid)
	}
	return rss, nil
}

// Process reads what the process pid holds.
func (b Box) Process(pid int) (Process, error) {
	v, err := b.keyed("proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return Process{}, err
	}
	return Process{Rss: v["Rss"], Pss: v["Pss"], SharedClean: v["Shared_Clean"],
		PrivateClean: v["Private_Clean"], PrivateDirty: v["Private_Dirty"], Swap: v["Swap"]}, nil
}
