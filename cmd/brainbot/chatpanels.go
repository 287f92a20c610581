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

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/message"
	"brainbot/bot/panel"
	"brainbot/bot/panel/host"
	"brainbot/bot/terminal"
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
	dir    string // the panels folder (-panels)
	brains *chatBrains
	// running are the runs launched; launched counts them until wait.
	running  sync.WaitGroup
	launched atomic.Int64
}

// launch runs a panel run in the background (host.Config.Launch); the
// chat waits for it before its next prompt.
func (c *chatPanels) launch(ctx context.Context) func(fn func(ctx context.Context)) {
	return func(fn func(ctx context.Context)) {
		c.launched.Add(1)
		c.running.Go(func() { fn(ctx) })
	}
}

// wait waits for the runs launched and reports whether there were any
// since the last wait.
func (c *chatPanels) wait() bool {
	c.running.Wait()
	return c.launched.Swap(0) > 0
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

func (c chatMembers) Outbox(to message.Key, _ int, _ *zap.Logger) host.Outbox {
	name := to.Bot
	if b := c.brains.brain(to.Bot); b != nil {
		name = b.Name
	}
	return c.screen.As(name)
}
