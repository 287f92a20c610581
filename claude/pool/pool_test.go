package pool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The pool's behaviour over time, each test in a synctest bubble: its
// clock moves only when every goroutine of the bubble waits, so a
// time.Sleep in a test is the pool's time passing, not the test's. The
// processes are fakes; none is started.

// fake is a process that gets ready after its start-up and exits when
// told.
type fake struct {
	shape         string
	ready, exited chan struct{}
	readyOnce     sync.Once
	exitOnce      sync.Once
}

func newFake() *fake {
	return &fake{ready: make(chan struct{}), exited: make(chan struct{})}
}

func (f *fake) Ready() <-chan struct{}  { return f.ready }
func (f *fake) Exited() <-chan struct{} { return f.exited }
func (f *fake) Shutdown()               { f.exit() }
func (f *fake) ExitCode() int           { return -1 }
func (f *fake) StderrTail() string      { return "killed" }
func (f *fake) getReady()               { f.readyOnce.Do(func() { close(f.ready) }) }
func (f *fake) exit()                   { f.exitOnce.Do(func() { close(f.exited) }) }

func (f *fake) ended() bool { return isDone(f.exited) }

// startup is how long a fake started by an env takes to get ready.
const startup = 200 * time.Millisecond

// env is a pool of fakes and what it asked of them.
type env struct {
	p    *Pool[*fake, string]
	logs *observer.ObservedLogs

	mu sync.Mutex
	// started are the spares started, raised the processes raised.
	started []*fake
	raised  map[*fake]int
	// hung: spares started from now on never get ready; gate, when
	// set, holds their start until it is closed.
	hung    bool
	gate    chan struct{}
	fail    error
	waiting int
}

// newEnv starts a pool of fakes in the calling bubble; it is closed when
// the test ends.
func newEnv(t *testing.T, cfg Config[*fake, string]) *env {
	core, logs := observer.New(zap.DebugLevel)
	e := &env{logs: logs, raised: map[*fake]int{}}
	cfg.Start, cfg.Raise, cfg.Log = e.start, e.raise, zap.New(core)
	cfg.CPUBusy, cfg.MaxStarting = idleCPUs, 2
	cfg.Waiting = func() int {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.waiting
	}
	cfg.Differs = func(a, b string) []string { return []string{a + "≠" + b} }
	e.p = New(cfg)
	t.Cleanup(e.p.Close)
	return e
}

func (e *env) start(shape string) (*fake, error) {
	e.mu.Lock()
	gate, hung, fail := e.gate, e.hung, e.fail
	e.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail != nil {
		return nil, fail
	}
	f := newFake()
	f.shape = shape
	if !hung {
		time.AfterFunc(startup, f.getReady)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = append(e.started, f)
	return f, nil
}

// spare is the i-th spare started.
func (e *env) spare(i int) *fake {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.started[i]
}

// spares are the spares started so far.
func (e *env) spares() []*fake {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*fake(nil), e.started...)
}

func (e *env) raise(f *fake) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.raised[f]++
}

func (e *env) timesRaised(f *fake) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.raised[f]
}

func (e *env) set(change func(e *env)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	change(e)
}

// settle lets the pool's time pass until everything it does now is done.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// spec is a bot's own shape, guest a shape of its brain without the
// question tool, panel one a caller keeps.
var (
	own   = Spec[string]{Shape: "own", Fingerprint: "own", Lineage: "brain", Bot: "bot"}
	guest = Spec[string]{Shape: "guest", Fingerprint: "guest", Lineage: "brain", Bot: "bot"}
	panel = Spec[string]{Shape: "panel", Fingerprint: "panel", Lineage: "panel", Bot: "bot"}
)

// withBotSpare is newEnv once the bot's first new conversation made its
// set and its spare is ready.
func withBotSpare(t *testing.T, cfg Config[*fake, string]) *env {
	e := newEnv(t, cfg)
	e.p.Follow("bot", own, 1, true)
	settle(time.Minute)
	return e
}

// request is a request of the bot's that ran in proc: it counts as
// running meanwhile, and keeps proc as conversation key's.
func (e *env) request(key string, proc *fake) {
	e.p.RequestStarted()
	e.p.Busy(key, proc)
	e.p.Done(key, proc, true)
	e.p.RequestEnded()
}

// The bot's first new conversation makes its set; a spare starts once it
// is quiet and serves the next one; a replacement starts; the taken one
// was raised to real work's priority.
func TestSpareServesNewConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 4, Spares: 1})
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); ok {
			t.Fatal("a spare before the bot's set was made")
		}
		e.p.Follow("bot", own, 1, true)
		e.request("bot/1", newFake())
		settle(time.Minute)
		if s := e.p.Stats(); s != (Stats{Ready: 1, Wanted: 1, Missed: 1, Started: 1}) {
			t.Fatalf("stats %+v, want one spare ready", s)
		}
		spare, ok := e.p.TakeSpare(t.Context(), own.Fingerprint)
		if !ok || spare != e.spare(0) {
			t.Fatal("the new conversation did not take the ready spare")
		}
		settle(time.Minute)
		if s := e.p.Stats(); s.Ready != 1 || s.Taken != 1 || s.Started != 2 || e.timesRaised(spare) != 1 {
			t.Errorf("stats %+v, raised %d times; want a replacement ready and the taken one raised", s, e.timesRaised(spare))
		}
		if _, ok := e.p.TakeSpare(t.Context(), guest.Fingerprint); ok {
			t.Error("a new conversation of another shape took the spare")
		}
	})
}

// A set grows when new conversations miss it, within MaxSpares, and
// shrinks back to its count as its spares sit unused.
func TestSparesAdaptToTheRateOfNewConversations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := withBotSpare(t, Config[*fake, string]{Max: 8, Spares: 1, MaxSpares: 3})
		if s := e.p.Stats(); s.Wanted != 1 || s.Ready != 1 {
			t.Fatalf("%+v after the set's first conversation, want its count 1", s)
		}
		e.p.RequestStarted() // no spare starts meanwhile
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); !ok {
			t.Fatal("no spare taken")
		}
		for range 4 {
			if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); ok {
				t.Fatal("a spare taken while none could start")
			}
		}
		if s := e.p.Stats(); s.Wanted != 3 {
			t.Fatalf("wanted %d after misses, want MaxSpares 3", s.Wanted)
		}
		e.p.RequestEnded()
		settle(time.Minute)
		if s := e.p.Stats(); s.Ready != 3 {
			t.Fatalf("%+v, want 3 ready", s)
		}
		settle(11 * time.Minute) // SpareIdle: unused, they go
		if s := e.p.Stats(); s.Wanted != 1 || s.Ready != 1 {
			t.Fatalf("%+v after the spares sat unused, want the set's count 1", s)
		}

		// A burst: what it missed it grows by.
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { e.p.TakeSpare(t.Context(), own.Fingerprint) })
		}
		wg.Wait()
		if s := e.p.Stats(); s.Wanted != min(3, 1+int(s.Missed)-4) || s.Taken+s.Missed != 8 {
			t.Errorf("after the burst: %+v; want 1 more wanted for each miss of the burst, at most 3", s)
		}
	})
}

// The spares of another shape of the bot's brain (a guest answer's) live
// beside the bot's own while their conversations come, and the log says
// how the shapes differ; once they sit unused for SpareIdle their set
// goes, and the bot keeps its own count only.
func TestOtherShapesSparesGoWhenUnused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 10, Spares: 1})
		e.p.Keep("bot", own, 1)
		e.p.Follow("bot", guest, 1, true)
		settle(time.Minute)
		if s := e.p.Stats(); s.Wanted != 2 || s.Ready != 2 {
			t.Fatalf("%+v, want a spare of each shape", s)
		}
		kept := e.logs.FilterMessageSnippet("spares kept for another shape").All()
		if len(kept) != 1 || kept[0].ContextMap()["differs"] == nil {
			t.Errorf("log lines %v; want one saying how the shapes differ", kept)
		}
		settle(11 * time.Minute)
		if s := e.p.Stats(); s.Wanted != 1 || s.Ready != 1 {
			t.Fatalf("%+v after the guests' spare sat unused, want the bot's own only", s)
		}
		if _, ok := e.p.TakeSpare(t.Context(), guest.Fingerprint); ok {
			t.Error("a guest answer after its shape's spares went was served by one")
		}
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); !ok {
			t.Error("the bot's own spare went too")
		}
	})
}

// A request of another lineage (an edited brain) replaces every set of
// the bot's, whatever their shape: their spares end, and a set of the new
// shape keeps the count.
func TestAnEditedBrainReplacesTheSets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 10, Spares: 1})
		e.p.Keep("bot", own, 2)
		e.p.Follow("bot", guest, 1, true)
		settle(time.Minute)
		old := e.spares()
		edited := Spec[string]{Shape: "edited", Fingerprint: "edited", Lineage: "edited brain", Bot: "bot"}
		e.p.Follow("bot", edited, 1, false)
		settle(time.Minute)
		for _, f := range old {
			if !f.ended() {
				t.Errorf("a spare of the old brain (%s) still runs", f.shape)
			}
		}
		if s := e.p.Stats(); s.Wanted != 2 || s.Ready != 2 {
			t.Errorf("%+v, want the old count of the new shape", s)
		}
		if n := e.logs.FilterMessageSnippet("spares replaced: an edited brain").Len(); n != 2 {
			t.Errorf("%d log lines blame an edited brain, want one for each old set", n)
		}
	})
}

// A spare yields to real work: none starts while a request waits for a
// slot, however long; once none waits, it starts.
func TestSparesYieldToWaitingRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 4, Spares: 1})
		e.set(func(e *env) { e.waiting = 1 })
		e.p.Follow("bot", own, 1, true)
		settle(time.Hour)
		if s := e.p.Stats(); s.Started != 0 {
			t.Fatalf("spares %+v while a request waits for a slot, want none started", s)
		}
		e.set(func(e *env) { e.waiting = 0 })
		settle(time.Minute)
		if s := e.p.Stats(); s.Ready != 1 {
			t.Errorf("spares %+v once no request waits, want one ready", s)
		}
	})
}

// A new conversation that comes while its bot's spare is being started
// (its process not yet there: on a loaded machine that takes a while,
// spares start below real work) waits for that spare rather than start a
// process of its own, and raises it once it is there, while it still
// waits.
func TestSparesARequestWaitsForASpareBeingStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := withBotSpare(t, Config[*fake, string]{Max: 4, Spares: 1})
		gate := make(chan struct{})
		e.set(func(e *env) { e.gate = gate })
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); !ok {
			t.Fatal("the ready spare was not taken")
		}
		synctest.Wait() // its replacement's start is held
		got := make(chan *fake)
		go func() {
			f, _ := e.p.TakeSpare(t.Context(), own.Fingerprint)
			got <- f
		}()
		synctest.Wait() // the request waits for the spare being started
		close(gate)
		synctest.Wait() // its process is there, not ready yet
		if n := e.timesRaised(e.spare(1)); n != 1 {
			t.Errorf("the spare being started was raised %d times while the request waited for it, want once", n)
		}
		f := <-got
		if f == nil || f != e.spare(1) {
			t.Fatalf("the request did not take the spare being started (%+v)", e.p.Stats())
		}
	})
}

// A spare still starting when a request comes for it is raised back to
// real work at once, while the request waits; waited for as long as a
// start like the set's last would take twice, it is given up, and the
// request starts a process of its own (a miss).
func TestSparesARequestWaitsForAreRaised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := withBotSpare(t, Config[*fake, string]{Max: 4, Spares: 1, SpareStart: time.Minute})
		e.set(func(e *env) { e.hung = true })
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); !ok {
			t.Fatal("the ready spare was not taken")
		}
		settle(0) // its replacement starts at once: it is quiet
		hung := e.spare(1)
		if e.timesRaised(hung) != 0 {
			t.Fatal("a spare no request waits for was raised")
		}
		begun := time.Now()
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); ok {
			t.Fatal("a spare that never got ready was taken")
		}
		synctest.Wait() // the raise, in the background
		if waited := time.Since(begun); waited < startup || waited > 2*startup {
			t.Errorf("waited %v for the spare, want up to twice the set's last start (%v)", waited, startup)
		}
		if e.timesRaised(hung) != 1 || e.p.Stats().Missed != 1 {
			t.Errorf("raised %d times, %+v; want raised once and a miss", e.timesRaised(hung), e.p.Stats())
		}
	})
}

// A spare that never gets ready is taken for hung after SpareStart, ended
// and replaced, and never handed to a request.
func TestHungSpareIsNeverUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 4, Spares: 1, SpareStart: time.Second})
		e.set(func(e *env) { e.hung = true })
		e.p.Follow("bot", own, 1, true)
		settle(2 * time.Second)
		if s := e.p.Stats(); s.Failed == 0 || !e.spare(0).ended() {
			t.Fatalf("%+v: the hung spare was not ended", s)
		}
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); ok {
			t.Error("a hung spare was taken")
		}
		if s := e.p.Stats(); s.Taken != 0 || s.Ready != 0 {
			t.Errorf("stats %+v: a spare that never started was counted ready or taken", s)
		}
		if len(e.logs.FilterMessageSnippet("did not start in time").All()) == 0 {
			t.Error("no log line says the spare hung")
		}
	})
}

// A spare that died is never handed out: asked for at once, the request
// gets none; noticed, it is replaced, after a pause that grows while
// spares keep failing.
func TestDeadSpareIsNeverUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := withBotSpare(t, Config[*fake, string]{Max: 4, Spares: 1})
		e.spare(0).exit()
		if f, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); ok && f == e.spare(0) {
			t.Fatal("the dead spare was taken")
		}
		settle(0)
		if s := e.p.Stats(); s.Failed != 1 || s.Ready+s.Starting != 0 {
			t.Fatalf("%+v, want the dead spare counted and not replaced yet", s)
		}
		if len(e.logs.FilterMessageSnippet("exited before it was used").All()) != 1 {
			t.Error("no log line says the spare died")
		}
		settle(time.Minute) // after the pause that follows a failure
		if s := e.p.Stats(); s.Ready != 1 {
			t.Errorf("%+v, want a replacement ready", s)
		}
	})
}

// Spares count against Max and go first: a conversation's process gone
// idle ends a spare rather than another conversation's process, and a
// spare starts again when there is room.
func TestSparesGoFirstWhenTheBudgetIsTight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 2, Spares: 1})
		e.p.Follow("bot", own, 1, true)
		a := newFake()
		e.request("bot/a", a)
		settle(time.Minute) // a's process and the spare: the budget is full
		b, ok := e.p.TakeSpare(t.Context(), own.Fingerprint)
		if !ok {
			t.Fatal("b found no spare")
		}
		e.request("bot/b", b)
		settle(time.Minute)
		if s := e.p.Stats(); s.Ready+s.Starting != 0 || e.p.Warm() != 2 || a.ended() || b.ended() {
			t.Fatalf("%+v, %d warm: want a's and b's processes kept and no spare", s, e.p.Warm())
		}
		e.p.End("bot/a")
		settle(time.Minute)
		if s := e.p.Stats(); s.Ready != 1 || !a.ended() {
			t.Fatalf("%+v once a's process ended, want a spare again", s)
		}
		spare := e.spares()[len(e.spares())-1]
		c := newFake() // a conversation that started a process of its own
		e.request("bot/c", c)
		synctest.Wait()
		if !spare.ended() || b.ended() || c.ended() {
			t.Errorf("c's process gone idle ended: the spare %v, b's %v, its own %v; want the spare only", spare.ended(), b.ended(), c.ended())
		}
	})
}

// A panel's spares give way to the bot's own: with the budget full, the
// bot's set, lacking the spare a new conversation took, ends a panel's
// spare to start its own.
func TestPanelSparesGiveWayToTheBots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 3, Spares: 1})
		e.p.Keep("bot", own, 1)
		e.p.Keep("panel/bot", panel, 2)
		settle(time.Minute)
		for i := range 2 {
			f, ok := e.p.TakeSpare(t.Context(), own.Fingerprint)
			if !ok {
				t.Fatalf("new conversation %d found no spare", i+1)
			}
			e.request("bot/"+string(rune('a'+i)), f)
			settle(time.Minute)
		}
		// Two conversations' processes and one spare: the bot's.
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); !ok {
			t.Errorf("the third new conversation found no spare (%+v)", e.p.Stats())
		}
		for _, f := range e.spares() {
			if f.shape == panel.Shape && !f.ended() {
				t.Error("a panel's spare still runs while the bot's set lacks one")
			}
		}
	})
}

// A busy bot keeps a spare for its next new conversation however many
// conversations are warm: with the budget full, the set that lacks the
// spare a new conversation just took ends the conversation's process
// idle longest for it; but not one just used, which is worth as much.
func TestBusyBotKeepsItsSpare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 3, Spares: 1, Idle: time.Hour})
		e.p.Follow("bot", own, 1, true)
		settle(time.Minute)
		old1, old2 := newFake(), newFake()
		e.request("bot/old1", old1)
		e.request("bot/old2", old2)
		settle(30 * time.Minute) // the budget full: two idle conversations and the spare
		newConversation := func(key string) {
			f, ok := e.p.TakeSpare(t.Context(), own.Fingerprint)
			if !ok {
				t.Fatalf("%s found no spare", key)
			}
			e.request(key, f)
		}
		newConversation("bot/new1")
		settle(time.Minute)
		if !old1.ended() || old2.ended() || !e.p.Has("bot/new1") {
			t.Fatal("the set lacking its spare did not end the conversation's process idle longest (and that one only)")
		}
		if s := e.p.Stats(); s.Ready != 1 {
			t.Fatalf("%+v: no spare for the next new conversation", s)
		}
		newConversation("bot/new2")
		settle(time.Minute)
		if !old2.ended() || e.p.Stats().Ready != 1 {
			t.Fatal("the second new conversation left the bot without a spare")
		}
		newConversation("bot/new3")
		settle(time.Minute)
		if s := e.p.Stats(); s.Ready+s.Starting != 0 || e.p.Warm() != 3 {
			t.Errorf("%+v, %d warm: a conversation used a minute ago was ended for a spare", s, e.p.Warm())
		}
	})
}

// Idle processes end after Idle, and the least recently used beyond Max
// at once; a process Done with keep false, or after Close, is ended.
func TestWarmPoolBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 1, Idle: time.Hour})
		a, b := newFake(), newFake()
		e.request("bot/a", a)
		time.Sleep(time.Second) // b's is used later
		e.request("bot/b", b)
		synctest.Wait()
		if !a.ended() || b.ended() || !e.p.Has("bot/b") || e.p.Has("bot/a") {
			t.Fatal("beyond Max, the least recently used process was not the one ended")
		}
		settle(2 * time.Hour)
		if !b.ended() || e.p.Warm() != 0 {
			t.Error("an idle process outlived Idle")
		}
		c := newFake()
		e.p.Busy("bot/c", c)
		if running, ok := e.p.Running("bot/c"); !ok || running != c || !e.p.Has("bot/c") {
			t.Error("the process running a request is not found")
		}
		e.p.Done("bot/c", c, false)
		if _, ok := e.p.Running("bot/c"); ok || !c.ended() {
			t.Error("a process not kept still runs")
		}
		d := newFake()
		e.p.Busy("bot/d", d)
		e.p.Close()
		e.p.Done("bot/d", d, true)
		if !d.ended() {
			t.Error("a process done after Close was kept")
		}
	})
}

// A conversation's idle process serves its next request when it fits;
// one that does not (another session, an edited brain, dead) is ended.
func TestTakeIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 4})
		a := newFake()
		e.request("bot/a", a)
		if f, ok := e.p.TakeIdle("bot/a", func(*fake) bool { return true }); !ok || f != a || e.timesRaised(a) != 0 {
			t.Fatal("the fitting idle process was not taken, or raised though it was started for a request")
		}
		e.request("bot/a", a)
		if _, ok := e.p.TakeIdle("bot/a", func(*fake) bool { return false }); ok {
			t.Fatal("an idle process that does not fit was taken")
		}
		synctest.Wait()
		if !a.ended() || e.p.Has("bot/a") {
			t.Error("an idle process that does not fit was kept")
		}
	})
}

// A conversation's process started ahead of its next request (after a
// restart) takes room only where the budget has it without ending another
// conversation's (spares are ended for it), and is raised by Expect or by
// the request that takes it, once.
func TestPrewarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 2, Spares: 1})
		e.p.Follow("bot", own, 1, true)
		e.request("bot/1", newFake())
		settle(time.Minute)
		prewarmed := newFake()
		start := func() (*fake, error) { return prewarmed, nil }
		if err := e.p.Prewarm("bot/2", start); err != nil {
			t.Fatal(err)
		}
		settle(0)
		if s := e.p.Stats(); s.Ready+s.Starting != 0 {
			t.Errorf("%+v: the spare was not ended for the prewarm", s)
		}
		if err := e.p.Prewarm("bot/2", start); err != nil {
			t.Errorf("a second prewarm of the same conversation: %v", err)
		}
		if err := e.p.Prewarm("bot/3", start); !errors.Is(err, ErrNoRoom) {
			t.Errorf("a prewarm beyond Max: %v, want ErrNoRoom", err)
		}
		failed := errors.New("no start")
		e.p.End("bot/1")
		if err := e.p.Prewarm("bot/3", func() (*fake, error) { return nil, failed }); !errors.Is(err, failed) {
			t.Errorf("a prewarm whose start failed: %v", err)
		}
		e.p.Expect("bot/2")
		e.p.Expect("bot/2")
		if f, ok := e.p.TakeIdle("bot/2", func(*fake) bool { return true }); !ok || f != prewarmed {
			t.Fatal("the prewarmed process was not taken")
		}
		synctest.Wait()
		if n := e.timesRaised(prewarmed); n != 1 {
			t.Errorf("raised %d times, want once: by Expect, not again by its request", n)
		}
		later := newFake()
		if err := e.p.Prewarm("bot/4", func() (*fake, error) { return later, nil }); err != nil {
			t.Fatal(err)
		}
		e.p.TakeIdle("bot/4", func(*fake) bool { return true })
		synctest.Wait()
		if n := e.timesRaised(later); n != 1 {
			t.Errorf("a prewarmed process taken without Expect raised %d times, want once", n)
		}
	})
}

// Spares off: nothing is started ahead, and nothing is counted.
func TestSparesOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 4})
		e.p.Keep("panel/x", panel, 2)
		e.p.Follow("bot", own, 1, true)
		e.request("bot/1", newFake())
		settle(time.Hour)
		if _, ok := e.p.TakeSpare(context.Background(), own.Fingerprint); ok || len(e.spares()) != 0 {
			t.Error("a spare with spares off")
		}
		if s := e.p.Stats(); s != (Stats{}) {
			t.Errorf("stats %+v with spares off", s)
		}
	})
}

// Keep with a count of 0 drops the name's sets and ends their spares; a
// request waiting for one of them looks again and gives up.
func TestDropSpares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 4, Spares: 1})
		e.p.Keep("panel/x", panel, 2)
		settle(time.Minute)
		e.p.Keep("panel/x", Spec[string]{}, 0)
		synctest.Wait()
		for _, f := range e.spares() {
			if !f.ended() {
				t.Error("a spare of a dropped set still runs")
			}
		}
		if s := e.p.Stats(); s.Wanted != 0 || s.Ready != 0 {
			t.Errorf("%+v after the set was dropped", s)
		}
	})
}

// A bot keeps at most maxShapes sets: a new conversation of one more
// shape drops the other shape's set wanted least recently.
func TestSparesKeepFewShapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 10, Spares: 1})
		e.p.Keep("bot", own, 1)
		shape := func(name string) Spec[string] {
			return Spec[string]{Shape: name, Fingerprint: name, Lineage: own.Lineage, Bot: "bot"}
		}
		for _, name := range []string{"guest", "schema"} {
			e.p.Follow("bot", shape(name), 1, true)
			settle(time.Minute)
		}
		e.p.Follow("bot", shape("fourth"), 1, true)
		settle(time.Minute)
		if s := e.p.Stats(); s.Wanted != maxShapes || s.Ready != maxShapes {
			t.Errorf("%+v, want %d sets", s, maxShapes)
		}
		if _, ok := e.p.TakeSpare(t.Context(), "guest"); ok {
			t.Error("the shape wanted least recently kept its set")
		}
		for _, fp := range []string{own.Fingerprint, "schema", "fourth"} {
			if _, ok := e.p.TakeSpare(t.Context(), fp); !ok {
				t.Errorf("shape %s lost its spare", fp)
			}
		}
	})
}

// A spare that cannot be started is counted failed and tried again after
// a pause.
func TestSpareThatCannotStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 4, Spares: 1})
		e.set(func(e *env) { e.fail = errors.New("no such file") })
		e.p.Follow("bot", own, 1, true)
		settle(0)
		if s := e.p.Stats(); s.Failed != 1 || s.Started != 0 {
			t.Fatalf("%+v, want the start counted failed", s)
		}
		e.set(func(e *env) { e.fail = nil })
		settle(time.Minute)
		if s := e.p.Stats(); s.Ready != 1 {
			t.Errorf("%+v, want a spare once starts work again", s)
		}
	})
}

// Each conversation's idle process ends when its own Idle is over, not
// at the next of a few coarse ticks: with Idle a minute, processes last
// used 20 s apart end 20 s apart, each a minute after its last use.
func TestIdleProcessesEndOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 4, Idle: time.Minute})
		procs := []*fake{newFake(), newFake(), newFake()}
		for i, f := range procs {
			if i > 0 {
				time.Sleep(20 * time.Second)
			}
			e.request("bot/"+string(rune('a'+i)), f)
		}
		settle(20*time.Second + time.Millisecond) // a minute and a moment after a's last use
		for i, f := range procs {
			if want := i == 0; f.ended() != want {
				t.Fatalf("a minute after the first's last use, process %d ended: %v, want %v", i, f.ended(), want)
			}
		}
		settle(20 * time.Second)
		if !procs[1].ended() || procs[2].ended() {
			t.Fatalf("a minute after the second's last use: it ended %v, the third %v; want only it", procs[1].ended(), procs[2].ended())
		}
		settle(20 * time.Second)
		if !procs[2].ended() || e.p.Warm() != 0 {
			t.Error("the third outlived its Idle")
		}
	})
}

// Ready counts the spares ready for a bot's own new conversations, for
// the order of waiting requests: not those still starting, nor those of
// another shape (a guest answer's), nor one taken.
func TestReadyCountsTheBotsOwnSpares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config[*fake, string]{Max: 10, Spares: 2})
		e.p.Keep("bot", own, 2)
		e.p.Follow("bot", guest, 1, true)
		if n := e.p.Ready("bot"); n != 0 {
			t.Fatalf("%d ready before any started", n)
		}
		settle(time.Minute)
		if n := e.p.Ready("bot"); n != 2 {
			t.Fatalf("%d ready (%+v), want the bot's own two", n, e.p.Stats())
		}
		if _, ok := e.p.TakeSpare(t.Context(), own.Fingerprint); !ok {
			t.Fatal("no spare taken")
		}
		if n := e.p.Ready("bot"); n != 1 {
			t.Errorf("%d ready once one was taken, want 1", n)
		}
	})
}
