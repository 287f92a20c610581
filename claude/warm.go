package claude

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"brainbot/claude/cliproc"
	"brainbot/claude/streamjson"
	"brainbot/ticket"
)

// WarmConfig keeps a conversation's CLI process alive between its
// requests, so a follow-up message pays no CLI start (~0.5 s) and no
// session reload, and keeps spares: processes started ahead of new
// conversations (spares.go). The zero value keeps none: every request
// starts a CLI.
type WarmConfig struct {
	// Max is how many idle processes are kept, spares included: spares
	// are ended first, then the least recently used conversation's. 0
	// keeps none, and no spares.
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
	// SpareMemoryMB is the most memory all spares together may hold, at
	// SpareMB each (0: no bound but Max): when it holds fewer spares than
	// the sets want, the sets with the fewest get them first.
	SpareMemoryMB int
}

// SpareMB is about what one spare holds: an idle CLI's resident memory
// (163 to 171 MB measured by BenchmarkNewConversation on 2.1.328, and a
// little more).
const SpareMB = 175

// SparesIn is how many spares memoryMB of memory holds.
func SparesIn(memoryMB int) int { return memoryMB / SpareMB }

func (w WarmConfig) withDefaults() WarmConfig {
	if w.Idle <= 0 {
		w.Idle = 10 * time.Minute
	}
	if w.RecycleAfter <= 0 {
		w.RecycleAfter = 100
	}
	if w.RecycleMB <= 0 {
		w.RecycleMB = 600
	}
	if w.MaxSpares <= 0 {
		w.MaxSpares = 4
	}
	if w.SpareIdle <= 0 {
		w.SpareIdle = 10 * time.Minute
	}
	if w.SpareStart <= 0 {
		w.SpareStart = 30 * time.Second
	}
	return w
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
	started     time.Time
	lastUsed    time.Time
	requests    int
	// spare: the process was started as a spare, before the request it
	// serves.
	spare bool
	// low: the process was started ahead of its conversation's next
	// request at the spares' lower CPU priority (PrewarmResume); the
	// request that takes it raises it.
	low bool
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
	return cli.fingerprint == fingerprint && req.Resume && cli.sessionID == req.SessionID && !isDone(cli.p.Exited())
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// shutdown ends the process and releases what it held.
func (cli *live) shutdown() {
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

// residentMB is the process's resident memory (Linux; 0 elsewhere).
func (cli *live) residentMB() int {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(cli.p.Pid()) + "/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(status) {
		if rest, ok := strings.CutPrefix(string(line), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return kb / 1024
		}
	}
	return 0
}

// pool holds the idle live processes by conversation, the ones busy with
// a request (so /stop can reach them), and the spares (spares.go).
type pool struct {
	cfg WarmConfig
	log *zap.Logger

	mu      sync.Mutex
	idle    map[string]*live
	running map[string]*live
	closed  bool
	ending  sync.WaitGroup // shutdowns and spare watchers in the background
	stop    chan struct{}
	stopped chan struct{}
	spares  spares
}

func newPool(cfg WarmConfig, log *zap.Logger) *pool {
	p := &pool{cfg: cfg.withDefaults(), log: log, idle: map[string]*live{}, running: map[string]*live{},
		stop: make(chan struct{}), stopped: make(chan struct{}), spares: newSpares()}
	if p.cfg.Max > 0 {
		go p.evictIdle()
	} else {
		close(p.stopped) // nothing is ever idle
	}
	return p
}

// take removes and returns conversation key's idle process, if any.
func (p *pool) take(key string) *live {
	p.mu.Lock()
	defer p.mu.Unlock()
	cli := p.idle[key]
	delete(p.idle, key)
	return cli
}

// busy records that cli serves a request of conversation key.
func (p *pool) busy(key string, cli *live) {
	if key == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[key] = cli
}

// done ends cli's request: it goes back to the pool when keep says so and
// the pool is open, else it is shut down. Beyond Max, spares are ended
// first, then the least recently used idle process.
func (p *pool) done(key string, cli *live, keep bool) {
	p.mu.Lock()
	if p.running[key] == cli {
		delete(p.running, key)
	}
	if !keep || p.closed || p.cfg.Max <= 0 {
		p.mu.Unlock()
		cli.shutdown()
		return
	}
	cli.lastUsed = time.Now()
	p.idle[key] = cli
	evicted := p.trim()
	p.mu.Unlock()
	p.endAll(evicted)
}

// trim makes the pool fit Max: it takes out spares, then the least
// recently used idle processes, and returns them for the caller to end
// once it has unlocked. Called with p.mu held.
func (p *pool) trim() []*live {
	var evicted []*live
	for len(p.idle)+p.spares.held() > p.cfg.Max {
		sp := p.spares.toEvict(-1)
		if sp == nil {
			break // only spares still being started: they are trimmed once started
		}
		p.log.Debug("claude: spare ended: the warm-process budget is full", zap.String("spares", sp.set.name), zap.Int("max_warm", p.cfg.Max))
		p.removeSpare(sp)
		evicted = append(evicted, sp.cli)
	}
	for len(p.idle) > p.cfg.Max {
		oldest := ""
		for k, c := range p.idle {
			if oldest == "" || c.lastUsed.Before(p.idle[oldest].lastUsed) {
				oldest = k
			}
		}
		p.log.Debug("claude: warm process evicted: the pool is full", zap.Int("max_warm", p.cfg.Max))
		evicted = append(evicted, p.idle[oldest])
		delete(p.idle, oldest)
	}
	return evicted
}

// endAll shuts each process down without making the caller wait.
func (p *pool) endAll(clis []*live) {
	for _, c := range clis {
		p.endLater(c)
	}
}

// endLater shuts cli down without making the caller wait for it.
func (p *pool) endLater(cli *live) {
	p.ending.Add(1)
	go func() {
		defer p.ending.Done()
		cli.shutdown()
	}()
}

// end shuts down conversation key's idle process (after /reset, say) and
// returns once it exited: a CLI that ends appends to its session's
// transcript, which must not land on a transcript restored after.
func (p *pool) end(key string) {
	if cli := p.take(key); cli != nil {
		cli.shutdown()
	}
}

// has reports whether conversation key has a process, running or idle.
func (p *pool) has(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle[key] != nil || p.running[key] != nil
}

// runningFor returns the process serving conversation key's request.
func (p *pool) runningFor(key string) *live {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running[key]
}

// evictIdle ends processes idle longer than cfg.Idle, until close.
func (p *pool) evictIdle() {
	defer close(p.stopped)
	tick := time.NewTicker(max(p.cfg.Idle/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		var old []*live
		for k, c := range p.idle {
			if time.Since(c.lastUsed) > p.cfg.Idle {
				old = append(old, c)
				delete(p.idle, k)
			}
		}
		p.mu.Unlock()
		for _, c := range old {
			p.log.Debug("claude: warm process ended: idle", zap.Duration("warm_idle_ms", p.cfg.Idle))
			p.endLater(c)
		}
	}
}

// close ends every idle process and spare and waits for all shutdowns;
// processes busy with a request are ended when it finishes.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var ended []*live
	for _, c := range p.idle {
		ended = append(ended, c)
	}
	p.idle = map[string]*live{}
	for _, set := range p.spares.sets {
		ended = append(ended, p.dropSet(set)...)
	}
	p.mu.Unlock()
	close(p.stop)
	<-p.stopped
	<-p.spares.stopped
	p.endAll(ended)
	p.ending.Wait()
}

// warmCount is how many processes are idle in the pool.
func (p *pool) warmCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// clisOf counts bot's warm processes (by their conversation's key, which
// begins with the bot) and spares.
func (p *pool) clisOf(bot string) (warm, spares int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key := range p.idle {
		if strings.HasPrefix(key, bot+"/") {
			warm++
		}
	}
	for _, set := range p.spares.sets {
		if set.shape.BotID == bot {
			spares += len(set.spares)
		}
	}
	return warm, spares
}

// interrupt asks the CLI serving conversation key to stop its running
// turn; false when none runs.
func (p *pool) interrupt(key string) bool {
	cli := p.runningFor(key)
	if cli == nil {
		return false
	}
	cli.interrupted.Store(true)
	return cli.p.Send(streamjson.InterruptLine(), cliproc.KillGrace) == nil
}
