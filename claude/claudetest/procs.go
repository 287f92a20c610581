package claudetest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Process is a live process found by ProcessesWithEnv.
type Process struct {
	PID     int
	Cmdline string // arguments joined by spaces
}

// ProcessesWithEnv lists the live processes whose environment holds the
// entry kv (e.g. "HOME=/tmp/x"). Environments are inherited, so this finds
// a CLI, the MCP servers it started and any grandchild, re-parented or not:
// how tests prove that nothing outlived a request. Zombies (empty environ)
// and processes we may not read are left out.
func ProcessesWithEnv(kv string) []Process {
	entry := []byte(kv + "\x00")
	entries, _ := os.ReadDir("/proc")
	var found []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !(bytes.HasPrefix(env, entry) || bytes.Contains(env, append([]byte{0}, entry...))) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		found = append(found, Process{PID: pid, Cmdline: string(bytes.TrimRight(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), " "))})
	}
	return found
}
