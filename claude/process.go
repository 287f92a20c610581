package claude

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"brainbot/claude/streamjson"
	"brainbot/reaper"
)

const (
	// killGrace is how long the CLI's process group gets between SIGTERM
	// and SIGKILL.
	killGrace = 2 * time.Second
	// exitGrace is how long the CLI may take to exit by itself once stdin
	// is closed after its last result; it has nothing left to do then.
	exitGrace = 5 * time.Second
	// drainGrace bounds the wait for stdout/stderr EOF after the CLI has
	// exited: only a process that left the CLI's group can still hold the
	// pipes open then, and its output is of no use.
	drainGrace = 2 * time.Second
	// stderrTailSize is how much of the end of stderr errors carry.
	stderrTailSize = 4 << 10
)

// process is one running CLI in its own process group, with goroutines
// reading its stdout (as Events) and stderr (into a tail buffer). shutdown
// ends all of it: no process of the group and no goroutine outlive it.
type process struct {
	cmd       *exec.Cmd
	terminate context.CancelFunc // SIGTERM to the group, SIGKILL after killGrace

	stdin          *os.File
	stdinOnce      sync.Once
	shutdownOnce   sync.Once
	writing        sync.Mutex // one stdin line at a time: a turn's and an interrupt
	stdout, stderr *os.File   // our read ends
	stderrTail     *tailBuffer

	events      chan lineEvent // stdout events; closed at stdout EOF
	stopReading chan struct{}  // closed when nobody receives events any more
	readers     sync.WaitGroup
	exited      chan struct{} // closed when Wait has returned
}

type lineEvent struct {
	ev  streamjson.Event
	err error
}

// startProcess starts command in dir with start, one of procs' (Start,
// or StartLow for a spare): tied to brainbot's life. The pipes are our own (not cmd.StdoutPipe), so reading them does
// not race with cmd.Wait and we can close them ourselves if a stray
// process keeps them open.
func startProcess(ctx context.Context, procs *reaper.Reaper, start func(*exec.Cmd) error, command string, args []string, dir string, env []string) (_ *process, err error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, command, args...)
	cmd.Dir, cmd.Env = dir, env
	// Its own group, so one signal reaches the CLI and the MCP servers and
	// anything else it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGTERM) }
	// Wait kills the leader if it ignores SIGTERM; shutdown then SIGKILLs
	// the rest of the group.
	cmd.WaitDelay = killGrace

	var files []*os.File // all pipe ends, closed on failure
	defer func() {
		if err != nil {
			cancel()
			for _, f := range files {
				f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := start(cmd); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("%w: %q: %w", errCLINotFound, command, err)
		}
		return nil, fmt.Errorf("claude: start CLI: %w", err)
	}
	// The child has its copies; ours would keep the pipes from reaching EOF.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &process{
		cmd:         cmd,
		terminate:   cancel,
		stdin:       inW,
		stdout:      outR,
		stderr:      errR,
		stderrTail:  newTailBuffer(stderrTailSize),
		events:      make(chan lineEvent),
		stopReading: make(chan struct{}),
		exited:      make(chan struct{}),
	}
	go func() {
		_ = procs.Wait(cmd) // the exit status is read from cmd.ProcessState
		close(p.exited)
	}()
	p.readers.Add(2)
	go p.readStdout()
	go func() {
		defer p.readers.Done()
		_, _ = io.Copy(p.stderrTail, p.stderr)
	}()
	return p, nil
}

// signalGroup signals the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}

func (p *process) readStdout() {
	defer p.readers.Done()
	defer close(p.events)
	r := streamjson.NewReader(p.stdout)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		select {
		case p.events <- lineEvent{ev, err}:
		case <-p.stopReading:
		}
		if err != nil {
			// Framing is lost (or the pipe is gone): discard the rest so
			// the CLI never blocks on a full pipe while it is shut down.
			_, _ = io.Copy(io.Discard, p.stdout)
			return
		}
	}
}

// send writes one stdin line. The deadline keeps a CLI that stopped
// reading stdin from blocking the driver forever.
func (p *process) send(line []byte, timeout time.Duration) error {
	p.writing.Lock()
	defer p.writing.Unlock()
	if err := p.stdin.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := p.stdin.Write(line)
	return err
}

// interrupt asks the CLI to stop the turn it is running, with a control
// request (a bare interrupt message is ignored): the turn ends with its
// result line, and the process goes on.
func (p *process) interrupt() error {
	return p.send(streamjson.InterruptLine(), killGrace)
}

// closeStdin tells the CLI there are no more turns: it exits after the
// current one.
func (p *process) closeStdin() {
	p.stdinOnce.Do(func() { p.stdin.Close() })
}

// exitCode is the CLI's exit status, -1 if a signal ended it. Only valid
// after exited is closed.
func (p *process) exitCode() int {
	return p.cmd.ProcessState.ExitCode()
}

// shutdown ends the CLI and everything it started, and waits for the
// reader goroutines. It lets a CLI that is finishing on its own exit
// normally (its stdin is closed here) for up to exitGrace.
func (p *process) shutdown() {
	p.shutdownOnce.Do(p.end)
}

func (p *process) end() {
	p.closeStdin()
	close(p.stopReading)
	select {
	case <-p.exited:
	case <-time.After(exitGrace):
		p.terminate()
		<-p.exited // WaitDelay bounds this: the leader is killed after killGrace
	}
	// MCP servers or other children the CLI left behind in its group.
	_ = signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
	p.terminate()

	done := make(chan struct{})
	go func() {
		p.readers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainGrace):
		// A process outside the group holds our pipes: stop reading them.
		p.stdout.Close()
		p.stderr.Close()
		<-done
	}
	p.stdout.Close()
	p.stderr.Close()
}
