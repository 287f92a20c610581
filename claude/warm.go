package claude

import (
	"os"
	"sync/atomic"
	"time"

	"brainbot/claude/cliproc"
	"brainbot/claude/pool"
	"brainbot/sysmem"
	"brainbot/ticket"
)

// WarmConfig keeps a conversation's CLI process alive between its
// requests, so a follow-up message pays no CLI start (~0.5 s) and no
// session reload, and keeps spares: processes started ahead of new
// conversations (package pool). The zero value keeps none: every request
// starts a CLI.
type WarmConfig struct {
	// Max is how many idle processes are kept, spares included: those
	// worth least are ended first (pool.Config.Max). 0 keeps none, and no
	// spares.
	Max int
	// Idle ends a process unused this long (default 10m).
	Idle time.Duration
	// RecycleAfter ends a process after this many requests (default 100)
	// and RecycleMB once its resident memory passes this (default 600):
	// long CLI sessions keep memory they no longer need.
	RecycleAfter int
	RecycleMB    int

	// Spares is how many spares a bot keeps for its new conversations
	// (Driver.KeepSpares); 0 turns spares off altogether.
	Spares int
	// MaxSpares is how many one set of spares grows to at most when its
	// new conversations come faster than its spares are replaced (default
	// 4; a set asked for more keeps its own count).
	MaxSpares int
	// SpareIdle ends a spare unused this long and starts a fresh one
	// (default 10m); a set grown beyond its count shrinks back so.
	SpareIdle time.Duration
	// SpareStart is how long a spare may take to start: one that has not
	// reached brainbot's tool server by then is taken for hung, ended and
	// replaced (default 30s).
	SpareStart time.Duration
	// SpareMemoryMB, when set, caps the memory all spares together may
	// hold, at pool.SpareMB each, beside the budget they count in with the
	// warm processes (0: no cap of their own): when it holds fewer spares
	// than the sets want, the sets with the fewest get them first.
	SpareMemoryMB int
	// Memory, when set, reads the box's memory: the processes kept then
	// fit it as measured, each counted by its own pages, and the ones
	// worth least end when the box runs short (pool.Config.Memory).
	Memory func() pool.Memory
}

// withDefaults fills the driver's own bounds; the pool fills its own
// (pool.Config).
func (w WarmConfig) withDefaults() WarmConfig {
	if w.RecycleAfter <= 0 {
		w.RecycleAfter = 100
	}
	if w.RecycleMB <= 0 {
		w.RecycleMB = 600
	}
	return w
}

// poolConfig is the pool's part of w.
func (w WarmConfig) poolConfig() pool.Config[*live, Request] {
	cfg := pool.Config[*live, Request]{Max: w.Max, Idle: w.Idle, Spares: w.Spares, MaxSpares: w.MaxSpares,
		SpareIdle: w.SpareIdle, SpareStart: w.SpareStart, SpareMemoryMB: w.SpareMemoryMB}
	if w.Memory != nil {
		cfg.Memory, cfg.Own = w.Memory, ownMemory
	}
	return cfg
}

// ownMemory is what cli holds of its own (its private dirty pages), 0
// when it cannot be read (it exited).
func ownMemory(cli *live) int64 {
	p, err := sysmem.Host().Process(cli.p.Pid())
	if err != nil {
		return 0
	}
	return p.Own()
}

// residentMB is what cli has resident, in MB: its own pages and its
// executable's (0 when it cannot be read).
func residentMB(cli *live) int {
	rss, err := sysmem.Host().Resident(cli.p.Pid())
	if err != nil {
		return 0
	}
	return int(rss >> 20)
}

// live is one running CLI: the process, its standing with the tool
// server, its MCP config file, and what it was started with.
type live struct {
	p         *cliproc.Process
	tools     *ticket.Process
	mcpConfig string
	// tmpDir is the process's TMPDIR, removed with it.
	tmpDir string
	// dropPrompt releases its system prompt file (promptFiles).
	dropPrompt func()
	// fingerprint is everything the process was started with except its
	// session: a request with another (an edited brain) needs a new one.
	fingerprint string
	sessionID   string
	requests    int
	// spare: the process was started as a spare, before the request it
	// serves.
	spare bool
	// interrupted: Interrupt asked the CLI to stop the current request's
	// turn.
	interrupted atomic.Bool
	// lastCost is the process's running total_cost_usd so far, and
	// costBase what it was when the current request began: the CLI
	// reports a running total per process.
	lastCost, costBase float64
}

// fits reports whether cli can serve req: the same settings, the same
// session resumed, and still running.
func (cli *live) fits(req Request, fingerprint string) bool {
	return cli.fingerprint == fingerprint && req.Resume && cli.sessionID == req.SessionID && !cli.p.HasExited()
}

// Ready is closed once the CLI reached brainbot's tool server: done with
// its start-up (for the pool).
func (cli *live) Ready() <-chan struct{} { return cli.tools.Reached() }

// Exited is closed once the CLI exited; ExitCode and StderrTail say why.
func (cli *live) Exited() <-chan struct{} { return cli.p.Exited() }
func (cli *live) ExitCode() int           { return cli.p.ExitCode() }
func (cli *live) StderrTail() string      { return cli.p.StderrTail() }

// Shutdown ends the process and releases what it held.
func (cli *live) Shutdown() {
	cli.p.Shutdown()
	cli.release()
}

// release gives back what the process was started with.
func (cli *live) release() {
	cli.tools.Close()
	os.Remove(cli.mcpConfig)
	os.RemoveAll(cli.tmpDir)
	cli.dropPrompt()
}
