package reaper

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

const adoptable = true

// tie makes cmd's parent-death signal SIGKILL.
func tie(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

func parentDeathSignal(sig syscall.Signal) error {
	return os.NewSyscallError("prctl(PR_SET_PDEATHSIG)", unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(sig), 0, 0, 0))
}

// lowerThread lowers the calling thread's priority by LowNice (to 19 at
// most): on Linux a nice value is a thread's, and what the thread starts
// inherits it. Raising one's nice needs no privilege.
func lowerThread() error {
	nice, err := threadNice()
	if err != nil {
		return err
	}
	return os.NewSyscallError("setpriority", unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), min(nice+LowNice, 19)))
}

// Nice is the nice value of thread pid, or of process pid's main thread.
func Nice(pid int) (int, error) {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid) // 20 - nice
	return 20 - prio, os.NewSyscallError("getpriority", err)
}

// threadNice is the calling thread's nice value.
func threadNice() (int, error) { return Nice(unix.Gettid()) }

// setGroupNice sets every thread of the processes in group pgid to nice.
func setGroupNice(pgid, nice int) error {
	for _, p := range processes() {
		if p.pgid != pgid {
			continue
		}
		tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p.pid), "task"))
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && err != unix.ESRCH {
				return os.NewSyscallError("setpriority", err)
			}
		}
	}
	return nil
}

func becomeSubreaper() error {
	return os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
}

// childrenOf lists the children of parent from /proc (every process's
// stat: /proc/<pid>/task/<tid>/children is not in every kernel).
func childrenOf(parent int) []orphan {
	var found []orphan
	for _, p := range processes() {
		if p.ppid == parent {
			found = append(found, p.orphan)
		}
	}
	return found
}

// process is a live process as /proc/<pid>/stat says.
type process struct {
	orphan
	ppid int
}

// processes lists every process from /proc.
func processes() []process {
	entries, _ := os.ReadDir("/proc")
	var found []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and
		// parentheses, so the fields start after the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		pgid, _ := strconv.Atoi(string(f[2]))
		found = append(found, process{orphan: orphan{pid: pid, pgid: pgid, exited: string(f[0]) == "Z"}, ppid: ppid})
	}
	return found
}

// reap waits for an adopted process, if it has exited (or, with block,
// until it does).
func reap(pid int, block bool) {
	options := unix.WNOHANG
	if block {
		options = 0
	}
	var status unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &status, options, nil)
		if err != unix.EINTR {
			return
		}
	}
}
