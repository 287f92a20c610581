// Package host runs panels in groups (issue 17): /panel <question> sent to
// any member bot starts the panel its file declares (package panel); the
// three turns run in package panel/engine, for which the host is the
// members, the chat and the journal. One panel runs at a time per group;
// a run is journaled and resumed after a restart.
//
// The host stands on narrow ports: the conversation pipeline's (admission,
// counting against the daily limit, asking the model with a Claude slot
// and a usage record), the members' (connected, in the group, an outbox
// as each of them), the store's panel runs and the speaker's voice.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/panel"
	"brainbot/bot/panel/engine"
	"brainbot/claude"
	"brainbot/message"
	"brainbot/metrics"
	"brainbot/state"
	"brainbot/toolspec"
)

// Pipeline is what panels need of the conversation pipeline.
type Pipeline interface {
	// Admit checks that user may have bot (brain b) answer now: allowed,
	// within its spending caps and daily limit (looked at, not counted).
	// When not, outcome and reply say how the /panel message is answered.
	Admit(ctx context.Context, b *brain.Brain, bot string, user int64, log *zap.Logger) (outcome, reply string, err error)
	// Charge counts one request of user against bot's daily limit.
	Charge(ctx context.Context, bot string, user int64) error
	// Ask runs q through the model in a Claude slot, with a session and a
	// process of its own, and records what it cost. A turn shutdown cut
	// short fails with ErrInterrupted.
	Ask(ctx context.Context, q Question) (*claude.Result, error)
	// Spent records what q's member spent on it outside the model (speech).
	Spent(ctx context.Context, q Question, openAIUSD float64)
	// KeepQuestionSpares keeps n Claude processes started ahead, under
	// the name set, for questions of q's shape (its bot, brain and
	// schema); 0 ends them.
	KeepQuestionSpares(set string, q Question, n int)
}

// Question is one member's turn as the pipeline asks it.
type Question struct {
	Bot   string
	Brain *brain.Brain
	// Run is the run's id: its usage records' request id.
	Run string
	// Chat and Thread are the group's, which sees the member at work
	// (recording a voice note when Speak) while the model answers.
	Chat   int64
	Thread int
	Speak  bool
	// User started the run; UserName is how the model reads them.
	User     int64
	UserName string
	Prompt   string
	// Schema, when set, is the JSON Schema the answer must follow.
	Schema string
	// OnText, when set, takes the answer's text so far as the model
	// writes it (claude.Request.OnText).
	OnText func(text string)
	Log    *zap.Logger
}

// ErrInterrupted marks a member's turn cut short by shutdown.
var ErrInterrupted = engine.ErrInterrupted

// Members are the bots that may sit on a panel (the transport, through
// the wiring).
type Members interface {
	// Connected reports whether bot is connected to Telegram now.
	Connected(bot string) bool
	// InChat reports whether bot is in chat, as its own client sees it.
	InChat(ctx context.Context, bot string, chat int64) (bool, error)
	// Outbox sends as bot to a group, replying to message replyTo (0:
	// none).
	Outbox(to message.Key, replyTo int, log *zap.Logger) Outbox
}

// Outbox sends to one chat as one member.
type Outbox interface {
	Text(ctx context.Context, text string, formatted bool) error
	File(ctx context.Context, kind message.FileKind, path string) error
	KeepAction(ctx context.Context, action message.Action) (stop func())
	Sent() []int
}

// Speaker speaks a panel member's words in its brain's voice
// (*mcp.Speaker); without one, panels that speak write instead.
type Speaker interface {
	// Speak returns text spoken, and spoken, the characters OpenAI spoke
	// (what it bills; after an error too).
	Speak(ctx context.Context, text string, settings toolspec.SpeechSettings) (data []byte, ext string, spoken int, err error)
}

// Config is what a host needs; Speaker and SpeakEarly may be nil.
type Config struct {
	// Dir holds the panel files (BRAINBOT_PANELS), read on every /panel.
	Dir string
	// DataDir is BRAINBOT_DATA: runs keep their files below it.
	DataDir  string
	Pipeline Pipeline
	Members  Members
	Runs     state.Panels
	// Brain returns a bot's current brain (nil once removed).
	Brain   func(bot string) *brain.Brain
	Speaker Speaker
	// SpeakEarly, when set, speaks a member's turn while the model
	// writes it (voice.go); nil (BRAINBOT_SPEECH_EARLY=off): once it is
	// written, with Speaker.
	SpeakEarly SpeakEarly
	// Launch runs fn as work of the owner: shutdown waits for it within
	// the grace period, then cancels ctx.
	Launch  func(fn func(ctx context.Context))
	Now     func() time.Time
	Metrics *metrics.Metrics
	Log     *zap.Logger
}

// Host runs the panels of a set of bots.
type Host struct {
	cfg    Config
	folder *panel.Folder
	engine *engine.Engine

	mu sync.Mutex
	// claimed are the /panel messages a member bot took up: the same
	// message reaches every member bot (privacy mode lets commands
	// through), and only the first answers it.
	claimed map[claim]time.Time
}

type claim struct {
	chat    int64
	message int
}

// New makes a host.
func New(cfg Config) *Host {
	h := &Host{cfg: cfg, folder: &panel.Folder{Dir: cfg.Dir}, claimed: map[claim]time.Time{}}
	h.engine = &engine.Engine{Members: h, Chat: h, Journal: h, Dir: cfg.DataDir, Log: cfg.Log}
	return h
}

// Report logs the panels folder at start: its panels, and the problems
// of its files (each as file:line), which /panel reports again when used.
func (h *Host) Report() {
	all, err := h.folder.Panels()
	if err != nil {
		h.cfg.Log.Error("panel files have problems; those panels do not run until fixed", zap.String("panels", h.folder.Dir), zap.Error(err))
	}
	for _, p := range all {
		h.cfg.Log.Info("panel loaded", zap.String("panel", p.ID), zap.Strings("members", p.Members), zap.Bool("speak", p.Speak))
	}
}

// OnPanel reports whether bot is a member of a valid panel now.
func (h *Host) OnPanel(bot string) bool {
	all, _ := h.folder.Panels() // problems are reported at start and on use
	_, _, ok := panel.For(all, bot, "")
	return ok
}

// claimFor reports whether the bot that calls it is the first to take up
// the message; claims older than an hour are forgotten.
func (h *Host) claimFor(chat int64, message int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for c, at := range h.claimed {
		if now.Sub(at) > time.Hour {
			delete(h.claimed, c)
		}
	}
	c := claim{chat, message}
	if _, taken := h.claimed[c]; taken {
		return false
	}
	h.claimed[c] = now
	return true
}

// panelUsage answers /panel without a question.
func panelUsage(names []string) string {
	return fmt.Sprintf("Ask the panel a question: /panel should cities ban cars?\n%s answer it, comment on one another's answers and reply to the comments.",
		strings.Join(names, ", "))
}

// question is /panel's argument: the text after the command.
func question(text string) string {
	if strings.HasPrefix(text, "/") {
		_, rest, _ := strings.Cut(text, " ")
		return strings.TrimSpace(rest)
	}
	return strings.TrimSpace(text)
}

// Start answers /panel, m, sent to a bot whose brain is b: it checks the
// panel can run here and now, journals a new run and launches it. It
// returns at once, with the message's outcome and the reply to send (""
// for none); with an error, the outcome is the phase that failed.
func (h *Host) Start(ctx context.Context, m *message.Inbound, b *brain.Brain, log *zap.Logger) (outcome, reply string, err error) {
	if !m.InGroup() {
		return "command", "Panels run in groups: add the panel's bots to a group and send /panel <question> there.", nil
	}
	all, err := h.folder.Panels()
	if err != nil {
		log.Error("panel files have problems; the valid ones are used", zap.String("panels", h.folder.Dir), zap.Error(err))
	}
	pn, q, ok := panel.For(all, m.Key.Bot, question(m.Text))
	if !ok {
		return "ignored", "", nil // this bot is on no panel: another member answers
	}
	if !h.claimFor(m.Key.Chat, m.MessageID) {
		return "duplicate", "", nil
	}
	log = log.With(zap.String("panel", pn.ID))
	names := make([]string, len(pn.Members))
	brains := map[string]string{}
	for i, member := range pn.Members {
		names[i] = member
		if mb := h.cfg.Brain(member); mb != nil {
			names[i] = mb.Name
		}
		brains[member] = names[i]
	}
	if q == "" {
		return "command", panelUsage(names), nil
	}
	if !pn.Allowed(m.Sender) {
		log.Info("user may not start the panel")
		return "denied", b.Messages.Denied, nil
	}
	if missing := h.missing(ctx, m.Key.Chat, pn, log); len(missing) > 0 {
		log.Info("panel members missing from the group", zap.Strings("missing", missing))
		return "command", fmt.Sprintf("This panel needs %s in this group; missing: %s. Add them and send /panel again.",
			strings.Join(names, ", "), strings.Join(missing, ", ")), nil
	}
	for _, member := range pn.Members {
		h.KeepSpares(member) // for the next run: this one's are ready, or missed
		mlog := log.With(zap.String("member", member))
		outcome, reply, err := h.cfg.Pipeline.Admit(ctx, h.cfg.Brain(member), member, m.Sender, mlog)
		switch {
		case err != nil:
			return "limit", "", err
		case outcome == "denied":
			mlog.Info("user not allowed by a panel member")
			return outcome, reply, nil
		case outcome != "":
			mlog.Info("a panel member's daily limit is reached")
			return outcome, reply, nil
		}
	}
	return h.begin(ctx, m, pn, q, brains, log)
}

// begin journals a new run of pn for m, counts it against the members'
// daily limits and launches it.
func (h *Host) begin(ctx context.Context, m *message.Inbound, pn *panel.Panel, q string, names map[string]string,
	log *zap.Logger) (outcome, reply string, err error) {
	speak := pn.Speak
	if speak && h.cfg.Speaker == nil {
		log.Warn("the panel speaks but there is no OpenAI key: its members write instead")
		speak = false
	}
	run := &engine.Run{
		ID: uuid.NewString(), Panel: pn.ID, Chat: m.Key.Chat, Thread: m.Key.Thread, MessageID: m.MessageID, Question: q,
		Starter: m.Sender, StarterName: m.SenderName, Members: slices.Clone(pn.Members), Names: names, Speak: speak,
		MaxChars: [3]int{pn.MaxChars.Answer, pn.MaxChars.Comment, pn.MaxChars.Reply}, CommentCap: pn.CommentCap,
		Started: time.Now().UTC(),
	}
	run.Seed = engine.NewSeed(run.ID)
	data, err := json.Marshal(run)
	if err == nil {
		err = h.cfg.Runs.StartPanel(ctx, state.PanelRun{ID: run.ID, Chat: run.Chat, Thread: run.Thread, MessageID: run.MessageID,
			Run: data, Created: run.Started})
	}
	switch {
	case errors.Is(err, state.ErrPanelStarted):
		return "duplicate", "", nil // replayed after a restart: the run resumes by itself
	case errors.Is(err, state.ErrPanelBusy):
		return "busy", "A panel is already running in this group. Wait for it to end, then ask again.", nil
	case err != nil:
		return "panel", "", err
	}
	// A panel is one request per member against the daily limits.
	for _, member := range pn.Members {
		if err := h.cfg.Pipeline.Charge(ctx, member, m.Sender); err != nil {
			log.Warn("could not count the panel against a member's daily limit", zap.String("member", member), zap.Error(err))
		}
	}
	log.Info("panel started", zap.String("panel_run", run.ID), zap.Strings("members", run.Members), zap.Uint64("seed", run.Seed),
		zap.Bool("speak", run.Speak))
	h.run(run)
	return "panel", "", nil
}

// missing names the members that are not in chat: not running, or not a
// member of the group as their own client sees it.
func (h *Host) missing(ctx context.Context, chat int64, pn *panel.Panel, log *zap.Logger) []string {
	type check struct {
		name    string
		present bool
	}
	checks := make([]check, len(pn.Members))
	var wg sync.WaitGroup
	for i, member := range pn.Members {
		b := h.cfg.Brain(member)
		checks[i].name = member
		if b == nil || !h.connectedMember(ctx, member) {
			continue
		}
		checks[i].name = b.Name
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			present, err := h.cfg.Members.InChat(ctx, member, chat)
			if err != nil {
				log.Info("panel member cannot see the group", zap.String("member", member), zap.Error(err))
				return
			}
			checks[i].present = present
		})
	}
	wg.Wait()
	var missing []string
	for _, c := range checks {
		if !c.present {
			missing = append(missing, c.name)
		}
	}
	return missing
}

// memberConnectWait is how long /panel waits for a member bot that is
// still connecting to Telegram (just started, or reconnecting) before it
// counts as missing.
const memberConnectWait = 10 * time.Second

// connectedMember reports whether member bot is connected, waiting a
// little for a bot of the brains folder that is still connecting.
func (h *Host) connectedMember(ctx context.Context, bot string) bool {
	deadline := time.Now().Add(memberConnectWait)
	for {
		connected := h.cfg.Members.Connected(bot)
		if connected || h.cfg.Brain(bot) == nil || time.Now().After(deadline) {
			return connected
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
