package conversation

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/state"
)

// prewarmAgent is the kit's agent with room for a few prewarms and the
// conversations that have a process already (running or idle).
type prewarmAgent struct {
	*fakeAgent
	room    int
	process map[string]bool
	// spares is how many spares each bot has ready.
	spares int
}

func (a *prewarmAgent) PrewarmResume(req claude.Request) error {
	if a.room == 0 {
		a.ev.Add("agent: no room for %s", req.Conversation)
		return claude.ErrNoRoom
	}
	a.room--
	a.ev.Add("agent: prewarm %s session=%q resume=%v", req.Conversation, req.SessionID, req.Resume)
	return nil
}

func (a *prewarmAgent) HasProcess(conversation string) bool { return a.process[conversation] }

func (a *prewarmAgent) Expect(conversation string) { a.ev.Add("agent: expect %s", conversation) }

// The kit's agent keeps no spares; it says it has spares ready.
func (a *prewarmAgent) KeepSpares(string, claude.Request, int) error { return nil }
func (a *prewarmAgent) DropSpares(string)                            {}
func (a *prewarmAgent) ReadySpares(string) int                       { return a.spares }

// A message tells the agent its conversation is expected as it starts to
// wait for a Claude slot, not once it has one: a process prewarmed for it
// below real work then finishes starting meanwhile.
func TestAMessageIsExpectedWhileItWaitsForASlot(t *testing.T) {
	var agent *prewarmAgent
	release := make(chan struct{})
	k := newKit(t, "", func(c *Config) {
		c.MaxClaude = 1
		agent = &prewarmAgent{fakeAgent: c.Agent.(*fakeAgent)}
		c.Agent, c.Warmer = agent, agent
	})
	answer := func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		if req.Conversation == (message.Key{Bot: kitBot, Chat: kitUser}).String() {
			<-release // holds the only slot
		}
		return &claude.Result{Text: "Hello.", Answered: true, SessionID: "s-" + req.Conversation}, nil
	}
	agent.mu.Lock()
	agent.answer = answer
	agent.mu.Unlock()
	first := make(chan struct{})
	go func() { defer close(first); k.serve(k.private("hello")) }()
	waitFor(t, func() bool { return len(agent.requests()) == 1 })
	second := make(chan struct{})
	go func() { defer close(second); k.serve(k.inGroup(7, "Bo", "hi all")) }()
	waitFor(t, func() bool {
		return k.ev.Index("agent: expect "+(message.Key{Bot: kitBot, Chat: kitGroup}).String()) >= 0
	})
	if n := len(agent.requests()); n != 1 {
		t.Errorf("%d runs while the slot is held, want the first alone", n)
	}
	close(release)
	<-first
	<-second
}

// oneSlot is a kit with one Claude slot, which the user's private
// conversation holds until the order is asked for, and agent, which
// answers every other request at once.
type oneSlot struct {
	t       *testing.T
	k       *kit
	agent   *prewarmAgent
	holder  string
	release chan struct{}
	served  sync.WaitGroup
}

func newOneSlot(t *testing.T, agent *prewarmAgent) *oneSlot {
	o := &oneSlot{t: t, agent: agent, release: make(chan struct{}), holder: (message.Key{Bot: kitBot, Chat: kitUser}).String()}
	o.k = newKit(t, "", func(c *Config) {
		c.MaxClaude = 1
		agent.fakeAgent = c.Agent.(*fakeAgent)
		c.Agent, c.Warmer = agent, agent
	})
	agent.mu.Lock()
	agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		if req.Conversation == o.holder {
			<-o.release // holds the only slot
		}
		return &claude.Result{Text: "Hello.", Answered: true, SessionID: "s-" + req.Conversation}, nil
	}
	agent.mu.Unlock()
	return o
}

// hold serves the holder's message and returns once it runs.
func (o *oneSlot) hold() {
	ran := len(o.agent.requests())
	o.wait(o.k.private("hello"))
	waitFor(o.t, func() bool { return len(o.agent.requests()) == ran+1 })
}

// wait serves in and returns once it waits for the slot.
func (o *oneSlot) wait(in *message.Inbound) {
	expected := func() int {
		return len(slices.DeleteFunc(o.k.ev.All(), func(e string) bool { return e != "agent: expect "+in.Key.String() }))
	}
	before := expected()
	o.served.Go(func() { o.k.serve(in) })
	waitFor(o.t, func() bool { return expected() > before })
}

// order frees the slot, waits until every message was served, and
// returns the conversations run from the holder's on.
func (o *oneSlot) order() []string {
	close(o.release)
	o.served.Wait()
	var order []string
	for _, req := range o.agent.requests() {
		order = append(order, req.Conversation)
	}
	return order[slices.Index(order, o.holder):]
}

// Under saturation a message whose start costs little goes before a
// cold one (a session stored, no process) that came shortly before it:
// one whose conversation has its process, or a new conversation whose
// bot has a spare ready. The pipeline tells the slots which is cheap (the
// order itself: slots_test.go).
func TestACheapMessageWaitsLessThanACold(t *testing.T) {
	cold, cheap := message.Key{Bot: kitBot, Chat: kitGroup}, message.Key{Bot: kitBot, Chat: kitGroup - 1}
	for _, c := range []struct {
		name  string
		agent *prewarmAgent
	}{
		{"warm", &prewarmAgent{process: map[string]bool{cheap.String(): true}}},
		{"new, a spare ready", &prewarmAgent{spares: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOneSlot(t, c.agent)
			o.k.serve(o.k.inGroup(7, "Cy", "hello")) // the cold conversation's session is stored
			o.hold()
			o.wait(o.k.inGroup(8, "Cy", "cold, first"))
			next := o.k.inGroup(9, "Di", "cheap, next")
			next.Key = cheap
			o.wait(next)
			if got, want := o.order(), []string{o.holder, cheap.String(), cold.String()}; !slices.Equal(got, want) {
				t.Errorf("ran %q, want the cheap message before the cold one", got)
			}
		})
	}
}

// Conversations that came from another instance get their process
// started, the most recent first, each transcript restored before; one
// with a process here already (it may be answering right now) is left
// alone, its transcript not restored; the prewarm stops when the agent
// has no room, and says so in its line.
func TestPrewarmMoved(t *testing.T) {
	busy := message.Key{Bot: kitBot, Chat: 2}
	var agent *prewarmAgent
	k := newKit(t, "", func(c *Config) {
		agent = &prewarmAgent{fakeAgent: c.Agent.(*fakeAgent), room: 2, process: map[string]bool{busy.String(): true}}
		c.Agent, c.Warmer = agent, agent
	})
	k.store.newerCopy = true // another instance answered them last
	var moved []state.RecentSession
	for chat := range int64(5) {
		moved = append(moved, state.RecentSession{Conversation: message.Key{Bot: kitBot, Chat: chat + 1},
			Session: state.Session{ID: fmt.Sprint("s", chat+1), LastUsed: time.Now()}})
	}
	if n := k.p.PrewarmMoved(context.Background(), moved); n != 2 {
		t.Errorf("%d prewarmed, want 2", n)
	}
	if got, want := k.ev.All(), []string{"state: restore alpha s1", "agent: end alpha/1/0", "agent: prewarm alpha/1/0 session=\"s1\" resume=true",
		"state: restore alpha s3", "agent: end alpha/3/0", "agent: prewarm alpha/3/0 session=\"s3\" resume=true",
		"state: restore alpha s4", "agent: end alpha/4/0", "agent: no room for alpha/4/0"}; !slices.Equal(got, want) {
		t.Errorf("events:\n got  %q\n want %q", got, want)
	}
	lines := k.logs.FilterMessage("moved conversations prewarmed").All()
	if len(lines) != 1 {
		t.Fatalf("%d summary lines, want one", len(lines))
	}
	if got, want := lines[0].ContextMap(), map[string]any{"prewarmed": int64(2), "already_warm": int64(1), "moved": int64(5)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("summary %v, want %v", got, want)
	}
}
