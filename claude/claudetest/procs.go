package claudetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Process is a live process found by ProcessesWithEnv or ProcessesUnder.
type Process struct {
	PID     int
	Cmdline string   // arguments joined by spaces
	Args    []string // the arguments, as given
}

// Flag is the value the process was given for flag (e.g. "--resume"):
// the argument after it; "" for none.
func (p Process) Flag(flag string) string {
	for i, a := range p.Args[:max(len(p.Args)-1, 0)] {
		if a == flag {
			return p.Args[i+1]
		}
	}
	return ""
}

// SystemPrompt is the text of the CLI's --system-prompt-file ("" for
// none, or once it is gone): the brain's prompt is never on its command
// line, where any local user reads it.
func (p Process) SystemPrompt() string {
	file := p.Flag("--system-prompt-file")
	if file == "" {
		return ""
	}
	text, _ := os.ReadFile(file)
	return string(text)
}

// ProcessesWithEnv lists the live processes whose environment holds the
// entry kv (e.g. "HOME=/tmp/x"). Environments are inherited, so this finds
// a CLI, the MCP servers it started and any grandchild, re-parented or not:
// how tests prove that nothing outlived a request. Zombies (empty environ)
// and processes we may not read are left out.
func ProcessesWithEnv(kv string) []Process {
	entry := []byte(kv + "\x00")
	return processesWhere(func(env []byte) bool {
		return bytes.HasPrefix(env, entry) || bytes.Contains(env, append([]byte{0}, entry...))
	})
}

// ProcessesUnder lists the live processes whose HOME is dir or a folder
// in it: brainbot gives each bot's CLI a HOME of its own under its data
// folder, and the CLI's children inherit it.
func ProcessesUnder(dir string) []Process {
	prefix := []byte("HOME=" + filepath.Clean(dir))
	return processesWhere(func(env []byte) bool {
		for _, kv := range bytes.Split(env, []byte{0}) {
			if rest, ok := bytes.CutPrefix(kv, prefix); ok && (len(rest) == 0 || rest[0] == '/') {
				return true
			}
		}
		return false
	})
}

// processesWhere lists the live processes whose environment (entries
// separated by NUL bytes) matches.
func processesWhere(match func(environ []byte) bool) []Process {
	entries, _ := os.ReadDir("/proc")
	var found []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !match(env) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		found = append(found, Process{PID: pid, Cmdline: string(bytes.TrimRight(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), " ")),
			Args: args})
	}
	return found
}

// WaitQuiet waits until the processes under dir (ProcessesUnder) used no
// CPU for 300 ms: a spare is ready once its CLI reached the tool server,
// but its start-up goes on a little longer, and a benchmark measures a
// spare done with it.
func WaitQuiet(t TB, dir string) {
	t.Helper()
	cpu := func() (ticks int) {
		for _, p := range ProcessesUnder(dir) {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
			// After the command's ")": state is field 3, utime and stime
			// fields 14 and 15.
			_, rest, _ := strings.Cut(string(stat), ") ")
			if f := strings.Fields(rest); len(f) > 12 {
				user, _ := strconv.Atoi(f[11])
				system, _ := strconv.Atoi(f[12])
				ticks += user + system
			}
		}
		return ticks
	}
	for last, deadline := cpu(), time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		now := cpu()
		if now == last {
			return
		}
		last = now
	}
	t.Fatalf("the processes under %s never went quiet", dir)
}
