// Package reaper ties child processes to this process's life, and takes
// care of the processes they leave behind.
//
// On Linux, each child started through a Reaper gets SIGKILL when this
// process dies, however it dies (a parent-death signal). The kernel sends
// it when the thread that started the child ends, not the process
// (golang/go#27505), so every child is started from one goroutine locked
// to its thread, which lives as long as the Reaper.
//
// A Reaper that adopts also makes this process the "child subreaper" of
// its descendants (PR_SET_CHILD_SUBREAPER): a process a child leaves
// behind, detached with setsid or not, becomes this process's child
// instead of init's. The Reaper reaps those that exit and, at Close, ends
// those still running. Only one Reaper per process may adopt.
//
// Children started with StartLow run below the priority of the rest (on
// Linux at nice LowNice, from a second thread of that nice: a child
// inherits its starting thread's, and so do its threads and children).
//
// Elsewhere children are started as they are, and nothing is adopted.
package reaper

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// ErrClosed is Start's error once the Reaper is closed.
var ErrClosed = errors.New("reaper: closed")

// Reaper starts children and adopts what they leave. Its methods are safe
// for concurrent use.
type Reaper struct {
	// normal starts children at this process's priority, low below it.
	normal, low starter
	adopt       bool

	// mu is held across each start and each reaping, so that a child
	// this process started is never taken for an orphan: children counts
	// the processes started and not yet waited for, by pid.
	mu       sync.Mutex
	children map[int]int
	closed   bool

	sigchld   chan os.Signal
	stop      chan struct{}
	reapingWG sync.WaitGroup
	closeOnce sync.Once
	ended     int
}

// starter is a goroutine locked to its thread, which starts children.
type starter struct {
	starts chan start
	ended  chan struct{} // closed when the goroutine has ended
}

// start is work for a starting goroutine's thread.
type start struct {
	run func() error
	err chan<- error
}

// LowNice is how much lower than the rest StartLow's children run: nice
// +10 gets about a tenth of the CPU a nice-0 process competing for it
// gets.
const LowNice = 10

// New starts the goroutine that starts children; with adopt, on Linux,
// this process becomes its descendants' subreaper.
func New(adopt bool) (*Reaper, error) {
	r := &Reaper{children: map[int]int{}}
	var err error
	if r.low, err = startStarter(lowerThread); err != nil {
		return nil, err
	}
	if adopt && adoptable {
		if err := becomeSubreaper(); err != nil {
			r.low.stop()
			return nil, err
		}
		r.adopt = true
		r.sigchld, r.stop = make(chan os.Signal, 1), make(chan struct{})
		signal.Notify(r.sigchld, syscall.SIGCHLD)
		r.reapingWG.Go(r.reapExited)
	}
	r.normal, _ = startStarter(nil) // nothing to prepare: cannot fail
	return r, nil
}

// startStarter starts a starting goroutine, its thread first readied
// with prepare (when not nil).
func startStarter(prepare func() error) (starter, error) {
	s := starter{starts: make(chan start), ended: make(chan struct{})}
	ready := make(chan error, 1)
	go s.startChildren(prepare, ready)
	if err := <-ready; err != nil {
		<-s.ended
		return starter{}, err
	}
	return s, nil
}

// startChildren starts each child from this goroutine's thread. The
// thread is never unlocked: it ends with the goroutine, at Close, and with
// it the children still running get their parent-death signal.
func (s starter) startChildren(prepare func() error, ready chan<- error) {
	runtime.LockOSThread()
	defer close(s.ended)
	if prepare != nil {
		if err := prepare(); err != nil {
			ready <- err
			return
		}
	}
	ready <- nil
	for st := range s.starts {
		st.err <- st.run()
	}
}

// stop ends the starting goroutine and waits for it.
func (s starter) stop() {
	close(s.starts)
	<-s.ended
}

// onThread runs f on s's thread. r.mu must be held.
func (r *Reaper) onThread(s starter, f func() error) error {
	if r.closed {
		return ErrClosed
	}
	errc := make(chan error, 1)
	s.starts <- start{run: f, err: errc}
	return <-errc
}

// Start starts cmd as a child tied to this process's life (on Linux its
// parent-death signal is SIGKILL). Wait for it with Wait, not cmd.Wait.
func (r *Reaper) Start(cmd *exec.Cmd) error { return r.start(r.normal, cmd) }

// StartLow is Start for a child whose work may wait for everything else
// this process does: it runs at nice LowNice above this process's (on
// Linux; elsewhere as Start). Raise brings it back.
func (r *Reaper) StartLow(cmd *exec.Cmd) error { return r.start(r.low, cmd) }

// Raise brings a child StartLow started back to this process's priority:
// every thread of every process in its process group (the child's pid,
// when it leads one), as far as they are there now. Lowering a nice
// value needs RLIMIT_NICE to allow it (systemd's LimitNICE=+0) or
// CAP_SYS_NICE: without, it fails and the child stays low. It does
// nothing elsewhere than on Linux.
func (r *Reaper) Raise(pgid int) error {
	var nice int
	r.mu.Lock()
	err := r.onThread(r.normal, func() (err error) { nice, err = threadNice(); return err })
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return setGroupNice(pgid, nice)
}

func (r *Reaper) start(s starter, cmd *exec.Cmd) error {
	tie(cmd)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.onThread(s, cmd.Start); err != nil {
		return err
	}
	r.children[cmd.Process.Pid]++
	return nil
}

// OnParentDeath asks the kernel for sig when this process's parent ends
// (on Linux; elsewhere it does nothing), until Close. The kernel keeps
// the request with the thread that made it, so it is made from the
// starting goroutine's. It sends sig too when only the parent's thread
// that started this process ends: whoever handles sig compares
// os.Getppid with the parent's pid before taking it for the parent's
// end. Check os.Getppid after the call as well: a parent that ended
// before it sends nothing.
func (r *Reaper) OnParentDeath(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.onThread(r.normal, func() error { return parentDeathSignal(sig) })
}

// Wait waits for a child started with Start, as cmd.Wait does.
func (r *Reaper) Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	pid := cmd.Process.Pid
	r.mu.Lock()
	if r.children[pid]--; r.children[pid] <= 0 {
		delete(r.children, pid)
	}
	r.mu.Unlock()
	return err
}

// reapExited reaps each adopted process as it exits (SIGCHLD), which would
// otherwise stay a zombie.
func (r *Reaper) reapExited() {
	for {
		select {
		case <-r.sigchld:
			r.mu.Lock()
			for _, o := range r.orphans() {
				if o.exited {
					reap(o.pid, false)
				}
			}
			r.mu.Unlock()
		case <-r.stop:
			return
		}
	}
}

// closeGrace bounds Close's work on adopted processes: killed, each is
// gone at once, but their own children come to us in turn.
const closeGrace = 5 * time.Second

// Close ends the starting goroutine (children started and still running
// get their parent-death signal: Close comes after their owner ended
// them) and, when it adopts, kills and reaps every adopted process still
// there and stops reaping. It returns how many adopted processes it
// ended.
func (r *Reaper) Close() int {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.normal.stop()
		r.low.stop()
		if !r.adopt {
			return
		}
		signal.Stop(r.sigchld)
		close(r.stop)
		r.reapingWG.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		for deadline := time.Now().Add(closeGrace); time.Now().Before(deadline); {
			orphans := r.orphans()
			if len(orphans) == 0 {
				break
			}
			for _, o := range orphans {
				if !o.exited {
					r.ended++
					kill(o)
				}
				reap(o.pid, true)
			}
		}
	})
	return r.ended
}

// orphan is an adopted process: a child of this process it did not start.
type orphan struct {
	pid, pgid int
	exited    bool // a zombie
}

// orphans lists the adopted processes. r.mu must be held.
func (r *Reaper) orphans() []orphan {
	var found []orphan
	for _, o := range childrenOf(os.Getpid()) {
		if r.children[o.pid] == 0 {
			found = append(found, o)
		}
	}
	return found
}

// kill ends an adopted process, with its process group when it leads one
// (a detached one does: what it started went along).
func kill(o orphan) {
	if o.pgid == o.pid {
		_ = syscall.Kill(-o.pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(o.pid, syscall.SIGKILL)
}
