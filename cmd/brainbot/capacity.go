package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/prometheus/procfs"

	"brainbot/claude/pool"
	"brainbot/syscpu"
	"brainbot/sysmem"
)

// doctor says what CPUs this box has for brainbot (package syscpu), and
// how many kept CLIs (warm processes and spares) it holds, from measured
// numbers: the box's memory (package sysmem) and what one idle CLI holds
// of its own, read from a CLI doctor starts as a spare waits for its
// first message.

const (
	// idleCLIOwnMB and cliSharedMB are what an idle CLI 2.1.328 holds,
	// read from /proc/PID/smaps_rollup beside two other CLIs: its own
	// pages (82-87 MB private dirty), and its executable's (64-65 MB),
	// which every CLI shares. doctor uses them where it cannot start one.
	idleCLIOwnMB = 85
	cliSharedMB  = 65
	// keptPerIdle is what a kept CLI counts, in idle CLIs: one that has
	// answered holds more (182 MB resident after a turn, 238 MB after ten,
	// against about 150 MB idle).
	keptPerIdle = 2
	// answeringPerIdle is what a CLI answering holds, in idle CLIs: 120
	// to 205 MB of its own measured on 1 CPU and 1-2 GB (issue 48),
	// against 85 idle; maxAnswering the processes run at once by
	// default where the memory holds more.
	answeringPerIdle = 2.5
	maxAnswering     = 4
	// brainbotMB is what brainbot holds itself: 29 MB resident idle with
	// five bots, 33 with 10,000 sessions stored (docs/performance.md),
	// and room for its buffers while it sends files.
	brainbotMB = 60
)

// answeringCLIs is how many CLIs a box of memory bytes holds answering
// at once, at ownMB each idle and all sharing sharedMB, in the share past
// which the pool ends kept ones (pool.PressureShare) less brainbot's own:
// between 1 and maxAnswering. On 1 GB 4 at once ran the box out of
// memory, the kernel killing CLIs that answered, however few were kept.
func answeringCLIs(memory int64, ownMB, sharedMB int) int {
	room := pool.PressureShare*float64(memory>>20) - float64(sharedMB) - brainbotMB
	return min(maxAnswering, max(1, int(room/(answeringPerIdle*float64(ownMB)))))
}

// keptCLIs is how many kept CLIs a box of memory bytes holds at ownMB
// each, all sharing sharedMB, in the share the pool keeps them in
// (pool.KeepShare: the rest is brainbot's, the system's and the answers'
// running).
func keptCLIs(memory int64, ownMB, sharedMB int) int {
	room := pool.KeepShare*float64(memory>>20) - float64(sharedMB)
	return max(0, int(room/float64(keptPerIdle*ownMB)))
}

// checkCapacity says what CPUs and memory the box has and how many kept
// CLIs it holds, beside the BRAINBOT_MAX_WARM that bounds their count.
func (m *Main) checkCapacity(ctx context.Context, cfg Config, r *report) {
	r.ok("CPUs", describeCPUs(syscpu.Host().CPUs()))
	box := sysmem.Host()
	limit, err := box.Limit()
	if err != nil {
		r.warn("memory", fmt.Sprintf("unknown (%v): %s alone bounds the CLIs kept", err, lookupSetting("BRAINBOT_MAX_WARM").name()))
		return
	}
	r.ok("memory", describeMemory(box, limit))

	ownMB, sharedMB := idleCLIOwnMB, cliSharedMB
	cli := fmt.Sprintf("~%d MB of its own (measured on Claude Code 2.1.328", ownMB)
	if r.claudeVersion != "" {
		idle, startCPU, err := m.idleCLI(ctx, cfg)
		if err == nil {
			ownMB, sharedMB = int(idle.Own()>>20), int((idle.Rss-idle.Own())>>20)
			cli = fmt.Sprintf("%d MB of its own, and took %.2f CPU-s to start (measured now; %d MB resident, the rest its executable's pages, shared by every CLI",
				ownMB, startCPU.Seconds(), idle.Rss>>20)
		} else {
			cli += fmt.Sprintf("; none started here: %v", err)
		}
	}
	n := keptCLIs(limit.Bytes, ownMB, sharedMB)
	detail := fmt.Sprintf("an idle CLI holds %s); %.1f GiB holds about %d kept CLIs, warm or spare (%.0f%% of it at %d times an idle CLI's own each)",
		cli, gib(limit.Bytes), n, pool.KeepShare*100, keptPerIdle)
	// No warning for a max-warm above it: the pool keeps the processes
	// within the memory as it is used, whatever the count allows.
	r.ok("kept CLIs", fmt.Sprintf("%s; brainbot keeps up to %d (%s), as the memory in use allows",
		detail, cfg.MaxWarm, lookupSetting("BRAINBOT_MAX_WARM").name()))
	checkAnswering(cfg, r, limit.Bytes, ownMB, sharedMB)
}

// checkAnswering says how many CLIs the box holds answering at once,
// beside the BRAINBOT_MAX_CLAUDE that runs them: more than it holds
// risk the kernel killing one in the middle of an answer.
func checkAnswering(cfg Config, r *report, memory int64, ownMB, sharedMB int) {
	n := answeringCLIs(memory, ownMB, sharedMB)
	detail := fmt.Sprintf("%.1f GiB holds %d CLIs answering at once (%.0f%% of it, less brainbot's own, at %.1f times an idle CLI's own each; at most %d); brainbot runs up to %d (%s)",
		gib(memory), n, pool.PressureShare*100, answeringPerIdle, maxAnswering, cfg.MaxClaude, lookupSetting("BRAINBOT_MAX_CLAUDE").name())
	if cfg.MaxClaude > n && n < maxAnswering {
		r.warn("answering", detail+": the box may run out of memory while they answer, the kernel killing one; set it lower, or give the box more memory")
		return
	}
	r.ok("answering", detail)
}

// describeMemory is the box's memory for an admin: how much, whence, how
// much is in use, and whether tasks stall for it.
func describeMemory(box sysmem.Box, limit sysmem.Limit) string {
	source := "MemTotal"
	if limit.Cgroup != "" {
		source = limit.Where()
	}
	s := fmt.Sprintf("%.1f GiB (%s, %s)", gib(limit.Bytes), source, limit.File)
	if used, err := box.Usage(limit); err == nil {
		s += fmt.Sprintf("; %.1f GiB in use", gib(used))
	}
	if pct, ok := box.Pressure(limit); ok {
		s += fmt.Sprintf("; tasks stalled for memory %.1f%% of the last 10 s", pct)
	}
	return s
}

// describeCPUs is the CPUs brainbot may use for an admin: how many,
// whence, and what they bound: the spares starting at once (the pool's
// MaxStarting).
func describeCPUs(c syscpu.CPUs) string {
	unit := "CPUs"
	if c.N == 1 {
		unit = "CPU"
	}
	return fmt.Sprintf("%d %s (%s); spares start %d at a time at most", c.N, unit, c.Where(), c.N)
}

func gib(bytes int64) float64 { return float64(bytes) / (1 << 30) }

// idleCLI starts the CLI as a spare waits for its first message, lets its
// start-up finish, and reads what it holds and the CPU its start took.
func (m *Main) idleCLI(ctx context.Context, cfg Config) (sysmem.Process, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	// A bot's flags (claude.Driver's args), but for its MCP servers.
	args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
		"--disable-slash-commands", "--setting-sources", "user", "--system-prompt", "You are a bot.", "--system-prompt-snapshot", "off",
		"--tools", "", "--strict-mcp-config", "--permission-mode", "dontAsk"}
	if claudeBare(cfg.ClaudeBare, m.getenv) {
		args = append(args, "--bare")
	}
	cmd, cleanup, err := m.probeCommand(ctx, cfg.ClaudeCmd, args...)
	if err != nil {
		return sysmem.Process{}, 0, err
	}
	defer cleanup()
	// Its stdin stays open: a CLI for stream-json input waits on it.
	if _, err := cmd.StdinPipe(); err != nil {
		return sysmem.Process{}, 0, err
	}
	if err := cmd.Start(); err != nil {
		return sysmem.Process{}, 0, err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	cpu, err := settle(ctx, cmd.Process.Pid, exited)
	if err != nil {
		return sysmem.Process{}, 0, err
	}
	p, err := sysmem.Host().Process(cmd.Process.Pid)
	return p, cpu, err
}

// settleQuiet is how long a starting CLI uses no CPU before it is taken
// for idle, waiting on its stdin: its start-up is one burst of about
// 0.3 s, and one timer later.
const settleQuiet = time.Second

// errExitedAtOnce says the CLI doctor started exited before it was idle.
var errExitedAtOnce = errors.New("it exited at once")

// settle waits until the process pid has used no CPU for settleQuiet,
// and returns the CPU it used. Its /proc folder gone means it exited
// (and was reaped) before settle saw exited closed.
func settle(ctx context.Context, pid int, exited <-chan struct{}) (time.Duration, error) {
	proc, err := procfs.NewProc(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, errExitedAtOnce
	}
	if err != nil {
		return 0, err
	}
	const every = 100 * time.Millisecond
	tick := time.NewTicker(every)
	defer tick.Stop()
	last, quiet := -1.0, time.Duration(0)
	for quiet < settleQuiet {
		select {
		case <-exited:
			return 0, errExitedAtOnce
		case <-ctx.Done():
			return 0, fmt.Errorf("still busy after %v", preflightTimeout)
		case <-tick.C:
		}
		stat, err := proc.Stat()
		if errors.Is(err, fs.ErrNotExist) {
			return 0, errExitedAtOnce
		}
		if err != nil {
			return 0, err
		}
		if cpu := stat.CPUTime(); cpu != last {
			last, quiet = cpu, 0
		} else {
			quiet += every
		}
	}
	return time.Duration(last * float64(time.Second)), nil
}
