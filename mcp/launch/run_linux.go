package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"brainbot/reaper"
)

const (
	// exitGrace is how long a server whose input closed may take to exit
	// by itself, and then after SIGTERM, before it is killed.
	exitGrace = time.Second
	// parentGone is the signal the kernel sends when the client ends. Not
	// one a client sends (SIGINT, SIGTERM), because the kernel sends it
	// also when only the client's thread that started us ends: on it,
	// the parent's pid tells which.
	parentGone = syscall.SIGUSR1
)

// Run runs command with args as Exec does, its environment environ cut
// down by Env, but as a child that does not outlive its client (the
// process that started this one: the Claude CLI): it is ended when this
// process's input closes (the client is done, or gone), when the client
// ends (a parent-death signal, for a client killed with SIGKILL) and when
// a signal ends this process (SIGINT, SIGTERM, SIGHUP: passed on to it
// first). The server gets SIGTERM, then SIGKILL, a second (exitGrace)
// apart; it is started with a parent-death signal of SIGKILL, so it dies
// with this process too. What the server leaves behind (its children) is
// this process's to end: it is their subreaper. The server keeps this
// process's group, so that the client's group, killed whole as brainbot
// kills its CLIs', holds the server's children too.
//
// Run returns only when the server does not start; otherwise this
// process exits with the server's status.
func Run(environ []string, command string, args, keep []string) error {
	env := Env(environ, keep)
	path, err := LookPath(command, env)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	parent := os.Getppid()
	procs, err := reaper.New(true)
	if err != nil {
		return err
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, parentGone)
	if err := procs.OnParentDeath(parentGone); err != nil {
		return err
	}
	cmd := &exec.Cmd{Path: path, Args: append([]string{command}, args...), Env: env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := procs.Start(cmd); err != nil {
		if pathErr, ok := errors.AsType[*fs.PathError](err); ok {
			err = pathErr.Err // "fork/exec PATH: ..." says PATH twice
		}
		return fmt.Errorf("exec %s: %w", path, err)
	}
	s := &server{pid: cmd.Process.Pid, parent: parent, signals: signals, exited: make(chan struct{}), hangup: make(chan struct{})}
	go s.waitExited()
	go s.waitHangup()
	s.supervise()
	_ = procs.Wait(cmd) // the status is in cmd.ProcessState
	procs.Close()       // the server's children it left
	os.Exit(exitStatus(cmd.ProcessState))
	return nil
}

// server is the command Run started, and what ends it.
type server struct {
	pid, parent int
	signals     <-chan os.Signal
	exited      chan struct{} // closed when the server has exited (not yet reaped)
	hangup      chan struct{} // closed when this process's input is closed
}

// supervise returns once the server has exited, ending it when its client
// is done with it or gone.
func (s *server) supervise() {
	if os.Getppid() != s.parent { // the client ended before it could tell
		s.end(0)
		return
	}
	for {
		select {
		case <-s.exited:
			return
		case <-s.hangup:
			s.end(0)
			return
		case sig := <-s.signals:
			switch {
			case sig != parentGone:
				s.end(sig.(syscall.Signal))
				return
			case os.Getppid() != s.parent:
				s.end(0)
				return
			}
		}
	}
}

// end ends the server: sig first if it is one (else a grace to exit on
// its own, its input closed), then SIGTERM, then SIGKILL, each after
// exitGrace. Signals that come meanwhile are passed on.
func (s *server) end(sig syscall.Signal) {
	steps := []syscall.Signal{sig, syscall.SIGKILL}
	if sig == 0 {
		steps = []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
		if !s.await(exitGrace) {
			return
		}
	}
	for _, step := range steps {
		_ = syscall.Kill(s.pid, step)
		if !s.await(exitGrace) {
			return
		}
	}
	<-s.exited
}

// await waits up to d for the server to exit, passing signals on; it
// reports whether it still runs.
func (s *server) await(d time.Duration) (running bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-s.exited:
			return false
		case <-timer.C:
			return true
		case sig := <-s.signals:
			if sig != parentGone {
				_ = syscall.Kill(s.pid, sig.(syscall.Signal))
			}
		}
	}
}

// waitExited closes s.exited when the server exits, and leaves it to be
// reaped (WNOWAIT): its pid stays its own until then, so no signal of end
// reaches another process.
func (s *server) waitExited() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, s.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	close(s.exited)
}

// waitHangup closes s.hangup when this process's input is closed: every
// writer of the pipe (or the socket's peer) closed it. It reads nothing:
// the input is the server's.
func (s *server) waitHangup() {
	fds := []unix.PollFd{{Fd: int32(os.Stdin.Fd()), Events: unix.POLLRDHUP}}
	for {
		n, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 || fds[0].Revents&unix.POLLNVAL != 0 {
			return // no input to watch: the server ends as it likes
		}
		if fds[0].Revents&(unix.POLLHUP|unix.POLLRDHUP|unix.POLLERR) != 0 {
			close(s.hangup)
			return
		}
	}
}

// exitStatus is a shell's $? for the server: its exit code, or 128 and the
// number of the signal that ended it.
func exitStatus(state *os.ProcessState) int {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}
