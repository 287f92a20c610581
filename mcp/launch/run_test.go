//go:build linux

package launch

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"brainbot/claude/claudetest"
)

// The lifetime tests run this test binary in four roles (os/exec's helper
// process pattern), named by lifeRoleEnv: a client of the launcher, the
// launcher (as `brainbot mcp exec` is), a stubborn server, and the
// server's child. Every one of them carries lifeMarkEnv, so that the test
// finds any that is left.
const (
	lifeRoleEnv = "LAUNCH_TEST_ROLE"
	lifeMarkEnv = "LAUNCH_TEST_MARK"
)

func runLifeHelperIfRequested() {
	switch os.Getenv(lifeRoleEnv) {
	case "client":
		// Starts the launcher with this process's own input, which the
		// test holds open: only the launcher's parent-death signal tells
		// it that its client is gone. Then waits to be killed.
		launcher := exec.Command(os.Args[0])
		launcher.Env = append(os.Environ(), lifeRoleEnv+"=launcher")
		launcher.Stdin, launcher.Stdout, launcher.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := launcher.Start(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		select {}
	case "launcher":
		env := append(withoutRole(os.Environ()), lifeRoleEnv+"=server")
		err := Run(env, os.Args[0], nil, []string{lifeRoleEnv, lifeMarkEnv})
		fmt.Println("error:", err)
		os.Exit(1)
	case "server":
		// A server that does not exit when its input closes, nor on
		// SIGINT, SIGTERM or SIGHUP, and has a child as deaf: one in its
		// group, one detached into a session of its own.
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		for _, detached := range []bool{false, true} {
			child := exec.Command(os.Args[0])
			child.Env = append(os.Environ(), lifeRoleEnv+"=child")
			child.SysProcAttr = &syscall.SysProcAttr{Setsid: detached}
			if err := child.Start(); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		select {}
	case "child":
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		select {}
	}
}

// withoutRole is environ without its role: the first of two would win.
func withoutRole(environ []string) []string {
	return slices.DeleteFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, lifeRoleEnv+"=") })
}

// startLife starts this test binary in role with a fresh marker; it
// returns the process, its input (a pipe, or with socket a socket, as the
// Claude CLI gives its servers) and the marker once the server said it
// is ready. Whatever carries the marker is killed at the end of the test.
func startLife(t *testing.T, role string, socket bool) (*exec.Cmd, io.WriteCloser, string) {
	t.Helper()
	mark := lifeMarkEnv + "=" + rand.Text()
	t.Cleanup(func() {
		for _, p := range claudetest.ProcessesWithEnv(mark) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), lifeRoleEnv+"="+role, mark)
	cmd.Stderr = os.Stderr
	var in io.WriteCloser
	var theirs *os.File
	if socket {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		in, theirs = os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
		cmd.Stdin = theirs
		t.Cleanup(func() { in.Close() })
	} else {
		var err error
		if in, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if theirs != nil {
		theirs.Close()
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the helpers said %q (%v), want ready", lines.Text(), lines.Err())
	}
	if n := len(claudetest.ProcessesWithEnv(mark)); n < 3 {
		t.Fatalf("%d processes carry the marker, want at least the server and its two children", n)
	}
	return cmd, in, mark
}

// wantAllGone waits for every process with the marker to end, with a
// bound (nothing else tells), and fails naming those left.
func wantAllGone(t *testing.T, mark, after string) bool {
	t.Helper()
	var left []claudetest.Process
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = claudetest.ProcessesWithEnv(mark); len(left) == 0 {
			return true
		}
	}
	var names []string
	for _, p := range left {
		names = append(names, fmt.Sprintf("%d %s %s", p.PID, p.Cmdline, roleOf(p.PID)))
	}
	t.Errorf("after %s, left running:\n%s", after, strings.Join(names, "\n"))
	return false
}

// roleOf is the helper role of a process, read from its environment.
func roleOf(pid int) string {
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for kv := range strings.SplitSeq(string(env), "\x00") {
		if role, ok := strings.CutPrefix(kv, lifeRoleEnv+"="); ok {
			return role
		}
	}
	return ""
}

// A client that is done closes the server's input: a server that does not
// exit then is ended, with what it started, and the launcher exits with
// its status.
func TestServerEndsWhenItsInputCloses(t *testing.T) {
	for _, socket := range []bool{false, true} {
		launcher, in, mark := startLife(t, "launcher", socket)
		in.Close()
		if !wantAllGone(t, mark, fmt.Sprintf("the input closed (a socket: %v)", socket)) {
			continue
		}
		err := launcher.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGKILL) {
			t.Errorf("the launcher ended with %v, want the status of a server killed with SIGKILL (137)", err)
		}
	}
}

// A client killed with SIGKILL (as the Claude CLI is when brainbot is)
// closes nothing it shares with others: the launcher learns of it from
// its parent-death signal, and ends the server and what it started.
func TestServerEndsWithItsKilledClient(t *testing.T) {
	client, _, mark := startLife(t, "client", false)
	if err := client.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = client.Wait()
	wantAllGone(t, mark, "the client was killed")
}

// A signal to the launcher (the CLI's SIGINT, then SIGTERM, at its exit)
// reaches the server; one that ignores it is killed.
func TestServerEndsWhenTheLauncherIsSignalled(t *testing.T) {
	launcher, _, mark := startLife(t, "launcher", false)
	if err := launcher.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantAllGone(t, mark, "SIGTERM to the launcher")
}
