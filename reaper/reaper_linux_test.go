package reaper

import (
	"bufio"
	"bytes"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// ownNice is the nice value this process runs its goroutines at: its
// threads', but for those a Reaper locked and lowered.
func ownNice(t *testing.T) int {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return niceOf(t, unix.Gettid())
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

// Raise brings StartLow's child, its threads and what it started back to
// this process's nice, where the rlimit or a capability allows it;
// elsewhere it fails and leaves them low.
func TestRaise(t *testing.T) {
	r, err := New(false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	own := ownNice(t)
	cmd := exec.Command("/bin/sh", "-c", `sleep 600 & echo $!; exec sleep 600`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartLow(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = r.Wait(cmd)
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(strings.TrimSpace(line))
	var rlimit unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NICE, &rlimit); err != nil {
		t.Fatal(err)
	}
	allowed := unix.Geteuid() == 0 || 20-int(rlimit.Cur) <= own
	err = r.Raise(cmd.Process.Pid)
	want := own
	if !allowed {
		want = min(own+LowNice, 19)
		if err == nil {
			t.Error("Raise lowered a nice value without the rlimit or the privilege")
		}
	} else if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{cmd.Process.Pid, grandchild} {
		if got := niceOf(t, pid); got != want {
			t.Errorf("process %d at nice %d after Raise, want %d", pid, got, want)
		}
	}
}

// niceOf is the nice value of process pid (its main thread's).
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	nice, err := Nice(pid)
	if err != nil {
		t.Fatal(err)
	}
	return nice
}
