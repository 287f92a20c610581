package claude

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"brainbot/claude/claudetest"
	"brainbot/reaper"
	"brainbot/ticket"
)

// The lifetime tests run this test binary as brainbot would run, a parent
// of CLIs (the helper process pattern of os/exec's tests), and end it as
// a crash or an admin would.
const (
	parentEnv     = "BRAINBOT_TEST_CLI_PARENT" // "crash" or "stop"
	parentDataEnv = "BRAINBOT_TEST_CLI_PARENT_DATA"
)

// runTestParentIfRequested acts as the parent and exits when the
// environment asks for it.
func runTestParentIfRequested() {
	if mode := os.Getenv(parentEnv); mode != "" {
		os.Exit(runTestParent(mode, os.Getenv(parentDataEnv)))
	}
}

// runTestParent runs a driver of the fake CLI. "crash": a request whose
// CLI hangs; once it runs, it prints "ready" and the CLI's pids and waits
// to be killed. "stop": a request whose CLI leaves a detached grandchild,
// then a normal stop (the driver, then the reaper of the processes CLIs
// leave); it prints the grandchild's pid before.
func runTestParent(mode, data string) int {
	// A stop adopts what the CLIs leave; a crash has the driver's own
	// reaper, which only ties the CLIs to this process's life.
	var procs *reaper.Reaper
	if mode == "stop" {
		var err error
		if procs, err = reaper.New(true); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	}
	running := make(chan struct{})
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.DebugLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == "claude: event" { // the CLI's system/init: it is running
			select {
			case <-running:
			default:
				close(running)
			}
		}
		return nil
	}))
	d, err := New(Config{Command: os.Args[0], DataDir: data, ToolsURL: "http://127.0.0.1:9", Tickets: ticket.NewRegistry(),
		Env: claudetest.FakeCLIEnv(), Reaper: procs, Log: log})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	req := Request{Mode: Text, SessionID: "11111111-2222-4333-8444-555555555555", SystemPrompt: "p", BotID: "life"}
	switch mode {
	case "crash":
		req.Prompt = "#hang"
		go func() { _, _ = d.Run(context.Background(), req) }()
		<-running
		fmt.Println("ready", strings.Trim(fmt.Sprint(claudetest.FakeProcesses()), "[]"))
		select {}
	case "stop":
		req.Prompt = "#setsid"
		res, err := d.Run(context.Background(), req)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println(res.Text)
		d.Close()
		fmt.Println("ended", procs.Close())
		return 0
	}
	return 2
}

// parent starts this test binary as the parent in mode and returns it and
// its stdout's lines.
func parent(t *testing.T, mode string) (*exec.Cmd, *bufio.Scanner) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), parentEnv+"="+mode, parentDataEnv+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// A CLI does not outlive brainbot killed with SIGKILL in the middle of a
// request (it gets a parent-death signal), where it would wait for its
// model call to end.
func TestCLIDiesWithItsParent(t *testing.T) {
	cmd, lines := parent(t, "crash")
	if !lines.Scan() {
		t.Fatalf("the parent said nothing: %v", lines.Err())
	}
	fields := strings.Fields(lines.Text())
	if len(fields) < 2 || fields[0] != "ready" {
		t.Fatalf("the parent said %q", lines.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, f := range fields[1:] {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		if !waitGone(t, pid, 10*time.Second) {
			t.Errorf("CLI %d outlived its killed parent", pid)
		}
	}
}

// A grandchild the CLI detached with setsid does not outlive a normal
// stop: brainbot adopts what its CLIs leave and ends it.
func TestDetachedGrandchildEndsAtStop(t *testing.T) {
	cmd, lines := parent(t, "stop")
	var said []string
	for lines.Scan() {
		said = append(said, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the parent: %v, said %q", err, said)
	}
	if len(said) != 2 || !strings.HasPrefix(said[0], "grandchild ") {
		t.Fatalf("the parent said %q, want the grandchild's pid", said)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(said[0], "grandchild "))
	if err != nil {
		t.Fatal(err)
	}
	if !waitGone(t, pid, 0) {
		t.Errorf("the detached grandchild %d outlived the stop", pid)
	}
	if said[1] != "ended 1" {
		t.Errorf("the parent said %q, want one adopted process ended", said[1])
	}
}

// waitGone waits up to timeout for pid to exit (a pidfd, so any process,
// not only a child) and reports whether it did; one still running is
// killed, so that no test leaves it behind.
func waitGone(t *testing.T, pid int, timeout time.Duration) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(timeout.Milliseconds()))
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if n == 0 {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		return false
	}
	// Exited: only a zombie left for its parent (or init) to reap.
	return true
}
