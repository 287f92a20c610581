//go:build !linux

package reaper

import (
	"errors"
	"os/exec"
	"syscall"
)

// Without Linux's parent-death signal and subreaper, children are started
// as they are and nothing is adopted.
const adoptable = false

func tie(*exec.Cmd) {}

func parentDeathSignal(syscall.Signal) error { return nil }

func lowerThread() error { return nil }

// Nice is 0: elsewhere than on Linux, children run as they are.
func Nice(int) (int, error) { return 0, nil }

func threadNice() (int, error) { return 0, nil }

func setGroupNice(int, int) error { return nil }

func becomeSubreaper() error { return errors.ErrUnsupported }

func childrenOf(int) []orphan { return nil }

func reap(int, bool) {}
