package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/mattn/go-isatty"

	"brainbot/bot/brain"
	"brainbot/bot/conversation"
	"brainbot/bot/intake"
	"brainbot/bot/panel/engine"
	"brainbot/bot/panel/host"
	"brainbot/bot/terminal"
	"brainbot/message"
	"brainbot/metrics"
	"brainbot/output"
	"brainbot/state/sqlite"
)

// chat holds a conversation with one brain in the terminal, through the
// pipeline a Telegram message takes (the brain, its system prompt, the
// real Claude CLI with its tools, the two-turn flow, our MCP tools, the
// limits), with no Telegram token: a bot author hears a persona before
// BotFather is involved. Each line on stdin is a message; the answers go
// to stdout. Its state (sessions, voice notes, pictures) lives in a
// folder of its own, never the service's.
func (m *Main) chat(ctx context.Context, args []string) error {
	fs := m.newFlagSet("chat", "chat [flags] BRAIN_FILE\n\n"+
		"Talks to the brain in BRAIN_FILE in the terminal, as a Telegram user would, without a token:\n"+
		"each line typed (or piped in) is a message; the answer shows as it is written. Voice notes and\n"+
		"pictures are written to the state folder and their paths printed; a question's options are\n"+
		"numbered: type the number to choose. /reset, /voice and /help work as in Telegram. Ctrl-C stops\n"+
		"the answer being written; Ctrl-D ends. Exits 0 when every message got its answer.\n\n"+
		"With -chat group, /panel <question> runs the panel of -panels the brain is on, its members the\n"+
		"brains in BRAIN_FILE's folder, each member's turns written under its name; Ctrl-C stops it.")
	user := fs.Int64("user", 1, "the Telegram user id you talk as (for access.allowed_users, limits)")
	firstName := fs.String("first-name", "Ada", "your first name, as the system prompt's {{user_first_name}} gets it")
	chatType := fs.String("chat", "private", "private, or group: a group chat, where the brain's groups setting applies (mention the bot as @<brain id>)")
	stateDir := fs.String("state", "", "folder for the chat's state: sessions, voice notes, pictures, panels' files, brainbot.log (default: a new temporary folder, removed at the end unless it holds voice notes, pictures, a panel's files or the log of an answer that failed)")
	verbose := fs.Bool("v", false, "also write brainbot's logs on stderr (they always go to brainbot.log in the state folder)")
	cfg, err := m.loadConfig(fs, args, settingsNamed("CLAUDE_CMD", "BRAINBOT_PANELS", "BRAINBOT_CLAUDE_BARE", "OPENAI_BASE_URL", "BRAINBOT_LOG_LEVEL"))
	switch {
	case err != nil:
		return usageError{err}
	case fs.NArg() != 1:
		return usageError{errors.New("want one brain file")}
	case *chatType != "private" && *chatType != "group":
		return usageError{fmt.Errorf("-chat %q: want private or group", *chatType)}
	}
	b, err := brain.LoadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(m.Stderr, err)
		return errReported
	}
	dataDir, temporary, err := chatState(*stateDir)
	if err != nil {
		return err
	}
	cfg.DataDir = dataDir
	// keep: the temporary folder holds what the chat showed or pointed
	// to (a panel's files and record among them); else it goes when the chat ends (last: the log and the CLIs
	// are done with it).
	keep := false
	if temporary {
		defer func() {
			if keep {
				fmt.Fprintf(m.Stderr, "The chat's state is kept in %s: its voice notes, pictures, panels' files and brainbot.log.\n", dataDir)
				return
			}
			_ = os.RemoveAll(dataDir) // best effort: a temporary folder
		}()
	}
	secrets := newSecretSet(m.Environ)
	logs := io.Discard
	if *verbose {
		logs = m.Stderr
	}
	log, err := newLogger(logSettings{Level: cfg.LogLevel, Format: cfg.LogFormat, File: filepath.Join(cfg.DataDir, "brainbot.log")},
		logs, m.Terminal, secrets)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	checks := &report{}
	m.checkClaude(ctx, cfg, checks)
	for _, f := range checks.findings {
		if f.status != statusOK {
			fmt.Fprintf(m.Stderr, "%s  %s: %s\n", f.status, f.check, f.detail)
		}
	}
	if checks.refused() {
		return errReported
	}
	if note := withoutOpenAI(b, cfg); note != "" {
		fmt.Fprintln(m.Stderr, "note: "+note)
	}
	db, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, sqlite.FileName))
	if err != nil {
		return err
	}
	defer db.Close()
	ans, err := m.startAnswerer(cfg, log, nil)
	if err != nil {
		return err
	}
	defer ans.close()
	ans.tools.UseNotes(notebook{db})

	screen := terminal.New(m.Stdout, b.Name)
	// Message ids are unique in a chat, on the same -state too: a panel's
	// run is journaled by its /panel message, and a message id of an
	// earlier chat would be taken for that run's. Ids from the clock in
	// milliseconds: a chat takes far fewer than one a millisecond, so a
	// later chat numbers above an earlier one.
	screen.NumberFrom(int(time.Now().UnixMilli()))
	stopping := make(chan struct{})
	defer close(stopping)
	brains := loadChatBrains(b)
	panels := &chatPanels{runs: &chatRuns{Panels: db, open: map[string][]byte{}}, dir: cfg.PanelsDir, brains: brains}
	panels.runs.end(ctx)
	p := conversation.New(conversation.Config{
		DataDir: cfg.DataDir, State: db, Agent: ans.driver, Chats: screen, Brain: brains.brain,
		Transcriber: ans.transcriber, Speaker: ans.speaker, FileAfterTurn: cfg.SpeechEarly == "off",
		MaxClaude: cfg.MaxClaude, MaxWaitingPerBot: cfg.MaxWaiting, MaxWait: cfg.MaxWait, QueueSize: 1,
		Panels: panels, Queues: unqueued{},
		Warmer: ans.driver, Spares: cfg.Spares, Stopping: stopping, LookupEnv: m.lookupEnv, OnSecret: secrets.Add,
		Now: time.Now, Metrics: metrics.New(), Log: log,
	})
	panels.host = host.New(host.Config{
		Dir: cfg.PanelsDir, DataDir: cfg.DataDir, Pipeline: p.PanelPort(), Members: chatMembers{screen, brains}, Runs: panels.runs, Brain: brains.brain,
		Speaker: ans.speaker, SpeakEarly: ans.speakEarly, Launch: panels.launch(ctx), Now: time.Now, Metrics: metrics.New(), Log: log,
	})
	p.KeepSpares(b.ID, b)
	defer p.DropSpares(b.ID)
	defer brains.each(panels.host.DropSpares) // those of the panels run

	c := &chatSession{p: p, panels: panels, screen: screen, brain: b, user: *user, firstName: *firstName}
	c.key = message.Key{Bot: b.ID, Chat: *user}
	if *chatType == "group" {
		c.chatType, c.key.Chat = "group", chatGroupID
	} else {
		c.chatType = "private"
	}
	c.typed = isTerminal(m.Stdin)
	fmt.Fprintf(m.Stderr, "Talking to %s (%s) as user %d (%s) in a %s chat; state in %s\n", b.Name, b.Path, *user, *firstName, c.chatType, cfg.DataDir)
	fmt.Fprintln(m.Stderr, "/help lists the bot's commands; Ctrl-C stops an answer (or a panel); Ctrl-D ends.")
	answered := c.converse(ctx, m.Stdin)
	keep = !answered || holdsFiles(filepath.Join(dataDir, output.Audio.Dir()), filepath.Join(dataDir, output.Image.Dir()),
		filepath.Join(dataDir, engine.OutputDir))
	if !answered {
		return errReported
	}
	return nil
}

// holdsFiles reports whether any of the folders holds a file.
func holdsFiles(dirs ...string) bool {
	for _, dir := range dirs {
		found := errors.New("found")
		err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				return found
			}
			return nil
		})
		if errors.Is(err, found) {
			return true
		}
	}
	return false
}

// withoutOpenAI says what a brain that speaks or draws does without an
// OpenAI key ("" with one): its replies fall back to text, which the
// chat would otherwise show without a word.
func withoutOpenAI(b *brain.Brain, cfg Config) string {
	switch {
	case cfg.OpenAIKey != "":
		return ""
	case b.TTS.Enabled:
		return "OPENAI_API_KEY is not set: " + b.Name + " answers in text, not with voice notes"
	case b.Image.Enabled:
		return "OPENAI_API_KEY is not set: " + b.Name + " cannot draw: its pictures fail"
	}
	return ""
}

// chatGroupID is the chat id of `chat -chat group`: a group's id is
// negative.
const chatGroupID = -100

// chatState is the chat's state folder: dir, made if need be, or a new
// temporary one. A folder given is kept when the chat ends; a temporary
// one only while it holds what the chat showed (voice notes and pictures
// to play and look at, the log of an answer that did not come).
func chatState(dir string) (path string, temporary bool, err error) {
	if dir == "" {
		path, err = os.MkdirTemp("", "brainbot-chat-")
		return path, true, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", false, fmt.Errorf("-state: %w", err)
	}
	path, err = filepath.Abs(dir)
	return path, false, err
}

// isTerminal reports whether r is a terminal: a person types, so there is
// a prompt and their words are not echoed.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// chatSession is one terminal conversation: the user's lines, served one
// at a time as the conversation's queue would.
// unqueued is the chat's Queues: the terminal hands the pipeline one
// message at a time, so no message of the user's waits when they forget.
type unqueued struct{}

func (unqueued) DropWaiting(bot string, user int64) int { return 0 }

type chatSession struct {
	p         *conversation.Pipeline
	panels    *chatPanels
	screen    *terminal.Screen
	brain     *brain.Brain
	key       message.Key
	chatType  string
	user      int64
	firstName string
	typed     bool
	update    int64
	// missed counts the messages that got no answer.
	missed int
}

// converse serves the lines of in until it ends (Ctrl-D), the user
// presses Ctrl-C with no answer being written, or ctx ends. It reports
// whether every message got its answer.
func (c *chatSession) converse(ctx context.Context, in io.Reader) bool {
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	lines := make(chan string)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(in)
		scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for scanner.Scan() {
			select {
			case lines <- scanner.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		if c.typed {
			c.screen.Prompt("> ")
		}
		select {
		case <-ctx.Done():
			return c.missed == 0
		case <-interrupts:
			return c.missed == 0
		case line, ok := <-lines:
			if !ok {
				return c.missed == 0
			}
			c.take(ctx, strings.TrimSpace(line), interrupts)
		}
	}
}

// take serves one line: an option chosen by its number, or a message.
func (c *chatSession) take(ctx context.Context, line string, interrupts <-chan os.Signal) {
	if line == "" {
		return
	}
	if !c.typed {
		c.screen.Print("you: %s", line)
	}
	if n, err := strconv.Atoi(line); err == nil {
		if button, id, ok := c.screen.Choice(n); ok {
			c.tap(ctx, button, id, interrupts)
			return
		}
	}
	u := c.written(line)
	if !intake.Wants(u, c.brain.Groups) {
		c.screen.Print("(%s does not answer this in a group: groups is %q; mention @%s or send a command)", c.brain.Name, c.brain.Groups, c.brain.ID)
		return
	}
	c.serve(ctx, u, interrupts)
}

// tap chooses button under message id, as a tap on it in Telegram: the
// choice then goes to the model as the user's words.
func (c *chatSession) tap(ctx context.Context, button message.Button, id int, interrupts <-chan os.Signal) {
	u := c.base()
	u.Kind, u.What, u.MessageID = message.Tapped, "callback_query", id
	u.Tap = message.Tap{QueryID: strconv.FormatInt(u.ID, 10), Data: button.Data}
	words, chosen := c.p.Tap(ctx, &message.Inbound{Update: u, RequestID: uuid.NewString(), Arrived: time.Now(), Progress: &chatProgress{}})
	if !chosen {
		return
	}
	c.serve(ctx, words, interrupts)
}

// serve answers u as the conversation's queue would, with the panel
// it starts, if any; Ctrl-C meanwhile stops the panel, or the answer as
// /stop does.
func (c *chatSession) serve(ctx context.Context, u message.Update, interrupts <-chan os.Signal) {
	progress := &chatProgress{}
	in := &message.Inbound{Update: u, RequestID: uuid.NewString(), Arrived: time.Now(), Progress: progress}
	done := make(chan struct{})
	panelRan := false
	go func() {
		defer close(done)
		c.p.Serve(ctx, in)
		panelRan = c.panels.wait(ctx) // its turns are its answer
	}()
	stopped := false
	for {
		select {
		case <-done:
			if !progress.answered.Load() && !panelRan {
				c.missed++
				if !stopped { // else the reply to the stop said it
					c.screen.Print("(no answer: see brainbot.log in the state folder, or run with -v)")
				}
			}
			return
		case <-interrupts:
			stopped = true
			if c.panels.stop() {
				c.screen.Print("(the panel stops)")
				continue
			}
			stop := c.written("/stop")
			c.p.Stop(ctx, &message.Inbound{Update: stop, RequestID: uuid.NewString(), Arrived: time.Now(), Progress: &chatProgress{}})
		}
	}
}

// written is the user's line as a message written in the chat.
func (c *chatSession) written(text string) message.Update {
	u := c.base()
	u.Kind, u.What, u.MessageID = message.Written, "message", c.screen.NextID()
	if c.chatType == "group" {
		text, u.Mentioned = withoutMention(text, c.brain.ID)
	}
	u.Text = text
	if name, ok := strings.CutPrefix(strings.Fields(text + " ")[0], "/"); ok && name != "" {
		name, bot, named := strings.Cut(name, "@")
		u.Command, u.ForOtherBot = strings.ToLower(name), named && !strings.EqualFold(bot, c.brain.ID)
	}
	return u
}

// base is what every update of the conversation says.
func (c *chatSession) base() message.Update {
	c.update++
	return message.Update{ID: c.update, Key: c.key, ChatType: c.chatType, Sender: c.user,
		SenderName: c.firstName, FirstName: c.firstName}
}

// withoutMention takes the bot's @mentions (its brain id stands for its
// username) out of a group message, as Telegram's decoding does.
func withoutMention(text, id string) (string, bool) {
	mention := regexp.MustCompile(`(?i)@` + regexp.QuoteMeta(id) + `\b`)
	if !mention.MatchString(text) || strings.HasPrefix(text, "/") {
		return text, mention.MatchString(text)
	}
	return strings.Join(strings.Fields(mention.ReplaceAllString(text, "")), " "), true
}

// chatProgress is a message's progress in a terminal chat: there is no
// log to hand it back to, only whether the answer came.
type chatProgress struct {
	answered atomic.Bool
	charged  atomic.Bool
}

func (p *chatProgress) Attempts() int { return 0 }
func (p *chatProgress) Charged() bool { return p.charged.Load() }
func (p *chatProgress) MarkCharged(context.Context, string) error {
	p.charged.Store(true)
	return nil
}
func (p *chatProgress) MarkAttempt(context.Context, string) error { return nil }
func (p *chatProgress) Answered()                                 { p.answered.Store(true) }
func (p *chatProgress) Finish(bool)                               {}
