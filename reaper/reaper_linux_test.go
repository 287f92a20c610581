package reaper

import (
	"bytes"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ownNice is the nice value this process runs its goroutines at: its
// threads', but for those a Reaper locked and lowered.
func ownNice(t *testing.T) int {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid()) // 20 - nice
	if err != nil {
		t.Fatal(err)
	}
	return 20 - prio
}

// StartLow's child, and what it starts, run LowNice below this process;
// Start's at its priority.
func TestStartLow(t *testing.T) {
	r, err := New(false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	own := ownNice(t)
	for _, c := range []struct {
		start func(*exec.Cmd) error
		want  int
	}{{r.Start, own}, {r.StartLow, min(own+LowNice, 19)}} {
		// The shell's child reports its own nice: what the CLI's MCP
		// servers would run at.
		cmd := exec.Command("/bin/sh", "-c", `exec cat /proc/self/stat`)
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := c.start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(cmd); err != nil {
			t.Fatal(err)
		}
		if got := statNice(t, out.String()); got != c.want {
			t.Errorf("child's nice %d, want %d (this process's is %d)", got, c.want, own)
		}
	}
}

// statNice reads the nice value out of a /proc/<pid>/stat line: the 19th
// field, counted past the command's name, which may hold spaces.
func statNice(t *testing.T, stat string) int {
	t.Helper()
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(fields) < 17 {
		t.Fatalf("stat %q: too short", stat)
	}
	nice, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}
	return nice
}
