// Package cliproc runs the Claude Code CLI as a process of its own: in its
// own process group, tied to brainbot's life (package reaper), its stdout
// handed out as lines, the end of its stderr kept, and ended with
// everything it started. It knows nothing of what the lines say (package
// streamjson does).
package cliproc

import (
	"bufio"
	"bytes"
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

	"brainbot/reaper"
)

const (
	// KillGrace is how long the CLI's process group gets between SIGTERM
	// and SIGKILL.
	KillGrace = 2 * time.Second
	// exitGrace is how long the CLI may take to exit by itself once stdin
	// is closed after its last result; it has nothing left to do then.
	exitGrace = 5 * time.Second
	// DrainGrace bounds the wait for stdout/stderr EOF after the CLI has
	// exited: only a process that left the CLI's group can still hold the
	// pipes open then, and its output is of no use.
	DrainGrace = 2 * time.Second
	// stderrTailSize is how much of the end of stderr errors carry.
	stderrTailSize = 4 << 10
)

// ErrNotFound: the CLI command does not exist or is not executable.
var ErrNotFound = errors.New("claude: CLI not found or not executable")

// Process is one running CLI in its own process group, with goroutines
// reading its stdout (as lines) and stderr (into a tail buffer). Shutdown
// ends all of it: no process of the group and no goroutine outlive it.
type Process struct {
	cmd       *exec.Cmd
	terminate context.CancelFunc // SIGTERM to the group, SIGKILL after KillGrace

	stdin          *os.File
	stdinOnce      sync.Once
	shutdownOnce   sync.Once
	writing        sync.Mutex // one stdin line at a time: a turn's and an interrupt
	stdout, stderr *os.File   // our read ends
	stderrTail     *tailBuffer

	lines       chan Line     // stdout's lines; closed at stdout EOF
	stopReading chan struct{} // closed when nobody receives lines any more
	readers     sync.WaitGroup
	exited      chan struct{} // closed when Wait has returned
	maxLine     int
}

// Line is one line of the CLI's stdout with anything but white space in
// it: its number (1-based, blank lines counted) and its bytes, which the
// next line does not overwrite; or Err, a read error or a line longer
// than the longest taken (bufio.ErrTooLong), after which no line comes.
type Line struct {
	N    int
	Text []byte
	Err  error
}

// Command is the CLI to start: its path and arguments, the folder it runs
// in, its whole environment, and the longest stdout line it may print.
type Command struct {
	Path    string
	Args    []string
	Dir     string
	Env     []string
	MaxLine int
}

// Start starts c with start, one of procs' (Start, or StartLow for a
// spare): tied to brainbot's life. The pipes are our own (not
// cmd.StdoutPipe), so reading them does not race with cmd.Wait and we can
// close them ourselves if a stray process keeps them open.
func Start(ctx context.Context, procs *reaper.Reaper, start func(*exec.Cmd) error, c Command) (_ *Process, err error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	// Its own group, so one signal reaches the CLI and the MCP servers and
	// anything else it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGTERM) }
	// Wait kills the leader if it ignores SIGTERM; shutdown then SIGKILLs
	// the rest of the group.
	cmd.WaitDelay = KillGrace

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
			return nil, fmt.Errorf("%w: %q: %w", ErrNotFound, c.Path, err)
		}
		return nil, fmt.Errorf("claude: start CLI: %w", err)
	}
	// The child has its copies; ours would keep the pipes from reaching EOF.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &Process{
		cmd:         cmd,
		terminate:   cancel,
		stdin:       inW,
		stdout:      outR,
		stderr:      errR,
		stderrTail:  newTailBuffer(stderrTailSize),
		lines:       make(chan Line),
		stopReading: make(chan struct{}),
		exited:      make(chan struct{}),
		maxLine:     c.MaxLine,
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

func (p *Process) readStdout() {
	defer p.readers.Done()
	defer close(p.lines)
	sc := bufio.NewScanner(p.stdout)
	sc.Buffer(make([]byte, 0, 64<<10), p.maxLine)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if !p.hand(Line{N: n, Text: bytes.Clone(sc.Bytes())}) {
			return
		}
	}
	if err := sc.Err(); err != nil {
		p.hand(Line{N: n + 1, Err: err})
		// The rest is of no use: discard it, so that the CLI never blocks
		// on a full pipe while it is shut down.
		_, _ = io.Copy(io.Discard, p.stdout)
	}
}

// hand gives l to the reader of Lines; false once nobody reads them.
func (p *Process) hand(l Line) bool {
	select {
	case p.lines <- l:
		return true
	case <-p.stopReading:
		_, _ = io.Copy(io.Discard, p.stdout)
		return false
	}
}

// Terminate ends the CLI: SIGTERM to its group, and SIGKILL after
// KillGrace. Shutdown still waits for it.
func (p *Process) Terminate() { p.terminate() }

// Lines are the CLI's stdout lines; closed at its end. A reader that
// stops reading them early (broken framing) terminates the process.
func (p *Process) Lines() <-chan Line { return p.lines }

// Exited is closed once the CLI has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// HasExited reports whether the CLI has exited.
func (p *Process) HasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Pid is the CLI's process id, its group's too.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// StderrTail is the end of what the CLI wrote to stderr.
func (p *Process) StderrTail() string { return p.stderrTail.String() }

// Send writes one stdin line. The deadline keeps a CLI that stopped
// reading stdin from blocking the driver forever.
func (p *Process) Send(line []byte, timeout time.Duration) error {
	p.writing.Lock()
	defer p.writing.Unlock()
	if err := p.stdin.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := p.stdin.Write(line)
	return err
}

// CloseStdin tells the CLI there are no more turns: it exits after the
// current one.
func (p *Process) CloseStdin() {
	p.stdinOnce.Do(func() { p.stdin.Close() })
}

// ExitCode is the CLI's exit status, -1 if a signal ended it. Only valid
// once Exited is closed.
func (p *Process) ExitCode() int {
	return p.cmd.ProcessState.ExitCode()
}

// Shutdown ends the CLI and everything it started, and waits for the
// reader goroutines. It lets a CLI that is finishing on its own exit
// normally (its stdin is closed here) for up to exitGrace.
func (p *Process) Shutdown() {
	p.shutdownOnce.Do(p.end)
}

func (p *Process) end() {
	p.CloseStdin()
	close(p.stopReading)
	select {
	case <-p.exited:
	case <-time.After(exitGrace):
		p.terminate()
		<-p.exited // WaitDelay bounds this: the leader is killed after KillGrace
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
	case <-time.After(DrainGrace):
		// A process outside the group holds our pipes: stop reading them.
		p.stdout.Close()
		p.stderr.Close()
		<-done
	}
	p.stdout.Close()
	p.stderr.Close()
}
