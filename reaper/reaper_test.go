package reaper

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The adopting tests run in a helper process (this test binary, as in
// os/exec's tests): a subreaper is one per process.
const helperEnv = "REAPER_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(adoptAndReap())
	}
	os.Exit(m.Run())
}

// adoptAndReap starts a shell that leaves two processes behind and exits:
// one that exits soon after (it must be reaped, not left a zombie), one
// that runs on (it must be ended at Close). It prints what it saw.
func adoptAndReap() int {
	r, err := New(true)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	cmd := exec.Command("/bin/sh", "-c", `sleep 0.2 & sleep 600 & echo $!`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := r.Start(cmd); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	lines := bufio.NewScanner(out)
	lines.Scan()
	runner, _ := strconv.Atoi(strings.TrimSpace(lines.Text()))
	if err := r.Wait(cmd); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	// Both are ours now. The short one exits and is reaped; poll /proc,
	// with a bound, as nothing else tells.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		kids := childrenOf(os.Getpid())
		if len(kids) == 1 && kids[0].pid == runner && !kids[0].exited {
			break
		}
		if time.Now().After(deadline) {
			fmt.Printf("children %+v, want only %d running\n", kids, runner)
			return 1
		}
	}
	fmt.Println("ended", r.Close(), "left", len(childrenOf(os.Getpid())))
	return 0
}

func TestAdoptReapAndEnd(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ended 1 left 0" {
		t.Errorf("helper: %v\n%s", err, out)
	}
}

// A Reaper that does not adopt starts and waits for children as exec
// does, and refuses to start one once closed.
func TestStartWait(t *testing.T) {
	r, err := New(false)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	if err := r.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(cmd); cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("Wait: %v, exit code %d, want 3", err, cmd.ProcessState.ExitCode())
	}
	if len(r.children) != 0 {
		t.Errorf("children after Wait: %v", r.children)
	}
	if n := r.Close(); n != 0 {
		t.Errorf("Close ended %d processes without adopting", n)
	}
	if err := r.Start(exec.Command("/bin/true")); err != ErrClosed {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}
