package main

// Panels in a terminal chat (`brainbot chat -chat group`): /panel runs
// the panel's three turns on the screen, each member's messages under its
// name, so that an author rehearses a panel before any bot has a token.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/panel"
	"brainbot/bot/panel/host"
	"brainbot/bot/terminal"
	"brainbot/message"
	"brainbot/state"
)

// chatBrains are the brains a terminal chat knows: the one talked to and
// the other valid brains of its folder, the members its panels may have.
type chatBrains struct {
	main   *brain.Brain
	others map[string]*brain.Brain
}

// loadChatBrains knows b and the valid brains beside it (an invalid one
// is left out: a panel that needs it names it as missing).
func loadChatBrains(b *brain.Brain) *chatBrains {
	c := &chatBrains{main: b, others: map[string]*brain.Brain{}}
	all, _ := brain.LoadDir(filepath.Dir(b.Path)) // problems: the brains are left out
	for _, o := range all {
		c.others[o.ID] = o
	}
	return c
}

// brain returns brain id, nil for none.
func (c *chatBrains) brain(id string) *brain.Brain {
	if id == c.main.ID {
		return c.main
	}
	return c.others[id]
}

// each calls fn with the id of every brain known.
func (c *chatBrains) each(fn func(id string)) {
	fn(c.main.ID)
	for id := range c.others {
		if id != c.main.ID {
			fn(id)
		}
	}
}

// chatPanels is the pipeline's Panels in a terminal chat: the panels
// host, with a line for what a chat cannot run, and the runs it launched
// to wait for before the next prompt.
type chatPanels struct {
	host   *host.Host
	runs   *chatRuns
	dir    string // the panels folder (-panels)
	brains *chatBrains
	// running are the runs launched; launched counts them until wait.
	running  sync.WaitGroup
	launched atomic.Int64

	mu sync.Mutex
	// cancels stop the runs launched since the last wait; stopped: one
	// was.
	cancels []context.CancelFunc
	stopped bool
}

// launch runs a panel run in the background (host.Config.Launch); the
// chat waits for it before its next prompt, and Ctrl-C stops it.
func (c *chatPanels) launch(ctx context.Context) func(fn func(ctx context.Context)) {
	return func(fn func(ctx context.Context)) {
		ctx, cancel := context.WithCancel(ctx)
		c.mu.Lock()
		c.cancels = append(c.cancels, cancel)
		c.mu.Unlock()
		c.launched.Add(1)
		c.running.Go(func() {
			defer cancel()
			fn(ctx)
		})
	}
}

// stop stops the runs going on, and reports whether there were any.
func (c *chatPanels) stop() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cancels {
		cancel()
	}
	c.stopped = c.stopped || len(c.cancels) > 0
	return len(c.cancels) > 0
}

// wait waits for the runs launched and reports whether there were any
// since the last wait, all run to their end. Runs stopped are ended in
// the journal.
func (c *chatPanels) wait(ctx context.Context) bool {
	c.running.Wait()
	c.mu.Lock()
	stopped := c.stopped
	c.cancels, c.stopped = nil, false
	c.mu.Unlock()
	if stopped {
		c.runs.end(ctx)
	}
	return c.launched.Swap(0) > 0 && !stopped
}

// Start answers /panel as the host does, and says in a line what keeps a
// terminal chat from running one: a private chat, a brain on no panel (with
// the panel files' problems), a member that is no brain of the folder.
func (c *chatPanels) Start(ctx context.Context, m *message.Inbound, b *brain.Brain, log *zap.Logger) (outcome, reply string, err error) {
	if !m.InGroup() {
		return "command", "Panels run in groups: start the chat with -chat group and send /panel <question>.", nil
	}
	all, problems := panel.LoadDir(c.dir)
	_, text, _ := strings.Cut(m.Text, " ")
	pn, _, ok := panel.For(all, b.ID, text)
	if !ok {
		reply = fmt.Sprintf("%s is on no panel of %s: a panel's file there lists it among its members.", b.Name, c.dir)
		if problems != nil {
			reply += "\nThe panel files have problems:\n" + problems.Error()
		}
		return "not on a panel", reply, nil
	}
	if missing := slices.DeleteFunc(slices.Clone(pn.Members), func(id string) bool { return c.brains.brain(id) != nil }); len(missing) > 0 {
		return "command", fmt.Sprintf("Panel %s needs the brains %s beside %s; not there (or not valid): %s.",
			pn.ID, strings.Join(pn.Members, ", "), b.Path, strings.Join(missing, ", ")), nil
	}
	return c.host.Start(ctx, m, b, log)
}

func (c *chatPanels) OnPanel(bot string) bool { return c.host.OnPanel(bot) }

// chatMembers are the panels' members in a terminal chat: every brain
// the chat knows sits at the terminal, and writes on the screen under its
// name.
type chatMembers struct {
	screen *terminal.Screen
	brains *chatBrains
}

func (c chatMembers) Connected(bot string) bool { return c.brains.brain(bot) != nil }

func (c chatMembers) InChat(_ context.Context, bot string, _ int64) (bool, error) {
	if c.brains.brain(bot) == nil {
		return false, errors.New("no brain " + bot + " beside the chat's")
	}
	return true, nil
}

func (c chatMembers) Outbox(to message.Key, replyTo int, _ *zap.Logger) host.Outbox {
	name := to.Bot
	if b := c.brains.brain(to.Bot); b != nil {
		name = b.Name
	}
	return c.screen.As(name, replyTo)
}

// chatRuns is the chat's panel journal: the store's, which knows the
// runs started here that did not finish, to end them when stopped.
type chatRuns struct {
	state.Panels

	mu   sync.Mutex
	open map[string][]byte // the runs started here, not finished: their last state
}

func (r *chatRuns) StartPanel(ctx context.Context, run state.PanelRun) error {
	err := r.Panels.StartPanel(ctx, run)
	if err == nil {
		r.mu.Lock()
		r.open[run.ID] = run.Run
		r.mu.Unlock()
	}
	return err
}

func (r *chatRuns) SavePanel(ctx context.Context, id string, run []byte, finished bool, now time.Time) error {
	err := r.Panels.SavePanel(ctx, id, run, finished, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case finished:
		delete(r.open, id)
	case err == nil:
		r.open[id] = run
	}
	return err
}

// end ends the runs that did not finish: stopped here, or left by a chat
// that was killed. A chat resumes none, and a run left running would
// refuse the next /panel in the group.
func (r *chatRuns) end(ctx context.Context) {
	left, _ := r.RunningPanels(ctx) // best effort: /panel then says one runs
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, run := range left {
		r.open[run.ID] = run.Run
	}
	for id, run := range r.open {
		_ = r.Panels.SavePanel(ctx, id, run, true, time.Now())
		delete(r.open, id)
	}
}
