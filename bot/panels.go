package bot

// Panels in a group (issue 17): /panel <question> sent to any member bot
// starts the panel its file declares (package panel); the three turns run
// in package panel/engine, which this file connects to Telegram, the
// Claude driver, speech and the store. One panel runs at a time per group;
// a run is journaled in the store and resumed after a restart.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/message"
	"brainbot/bot/panel"
	"brainbot/bot/panel/engine"
	"brainbot/bot/store"
	"brainbot/bot/telegram"
	"brainbot/claude"
	"brainbot/pricing"
	"brainbot/sysprompt"
	"brainbot/toolspec"
)

// Speaker speaks a panel member's words in its brain's voice
// (*mcp.Speaker); without one, panels that speak write instead.
type Speaker interface {
	Speak(ctx context.Context, text string, settings toolspec.SpeechSettings) (data []byte, ext string, err error)
}

// panels runs the panels of one Manager. It is the engine's members, chat
// and journal.
type panels struct {
	folder  *panel.Folder
	dataDir string
	p       *pipeline
	// brain is a bot's current brain (nil once removed).
	brain func(bot string) *brain.Brain
	// member is a bot's current client and identity (nil while it
	// connects or once it is stopped).
	member  func(bot string) (*telegram.Client, message.Identity)
	speaker Speaker
	// launch runs fn as work of the Manager: shutdown waits for it within
	// the grace period, then cancels ctx.
	launch func(fn func(ctx context.Context))
	log    *zap.Logger
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

func newPanels(dir, dataDir string, p *pipeline, brain func(string) *brain.Brain, member func(string) (*telegram.Client, message.Identity),
	speaker Speaker, launch func(func(context.Context)), log *zap.Logger) *panels {
	h := &panels{folder: &panel.Folder{Dir: dir}, dataDir: dataDir, p: p, brain: brain, member: member, speaker: speaker, launch: launch, log: log,
		claimed: map[claim]time.Time{}}
	h.engine = &engine.Engine{Members: h, Chat: h, Journal: h, Dir: dataDir, Log: log}
	return h
}

// report logs the panels folder at start: its panels, and the problems
// of its files (each as file:line), which /panel reports again when used.
func (h *panels) report() {
	all, err := h.folder.Panels()
	if err != nil {
		h.log.Error("panel files have problems; those panels do not run until fixed", zap.String("panels", h.folder.Dir), zap.Error(err))
	}
	for _, p := range all {
		h.log.Info("panel loaded", zap.String("panel", p.ID), zap.Strings("members", p.Members), zap.Bool("speak", p.Speak))
	}
}

// onPanel reports whether bot is a member of a valid panel now.
func (h *panels) onPanel(bot string) bool {
	all, _ := h.folder.Panels() // problems are reported at start and on use
	_, _, ok := panel.For(all, bot, "")
	return ok
}

// claimFor reports whether the bot that calls it is the first to take up
// the message; claims older than an hour are forgotten.
func (h *panels) claimFor(chat int64, message int) bool {
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
func panelUsage(p *panel.Panel, names []string) string {
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

// start answers /panel: it checks the panel can run here and now, journals
// a new run and launches it. It returns at once; the run goes on.
func (h *panels) start(r *request) {
	in := r.in
	if !in.InGroup() {
		r.say("command", "Panels run in groups: add the panel's bots to a group and send /panel <question> there.")
		return
	}
	all, err := h.folder.Panels()
	if err != nil {
		r.log.Error("panel files have problems; the valid ones are used", zap.String("panels", h.folder.Dir), zap.Error(err))
	}
	pn, q, ok := panel.For(all, in.Key.Bot, question(in.Text))
	if !ok {
		r.drop("ignored") // this bot is on no panel: another member answers
		return
	}
	if !h.claimFor(in.Key.Chat, in.MessageID) {
		r.drop("duplicate")
		return
	}
	r.log = r.log.With(zap.String("panel", pn.ID))
	names := make([]string, len(pn.Members))
	brains := map[string]string{}
	for i, m := range pn.Members {
		names[i] = m
		if b := h.brain(m); b != nil {
			names[i] = b.Name
		}
		brains[m] = names[i]
	}
	if q == "" {
		r.say("command", panelUsage(pn, names))
		return
	}
	if !pn.Allowed(in.Sender) {
		r.log.Info("user may not start the panel")
		r.say("denied", r.brain.Messages.Denied)
		return
	}
	if missing := h.missing(r, pn); len(missing) > 0 {
		r.log.Info("panel members missing from the group", zap.Strings("missing", missing))
		r.say("command", fmt.Sprintf("This panel needs %s in this group; missing: %s. Add them and send /panel again.",
			strings.Join(names, ", "), strings.Join(missing, ", ")))
		return
	}
	for _, m := range pn.Members {
		b := h.brain(m)
		if !allowed(b, in.Sender) {
			r.log.Info("user not allowed by a panel member", zap.String("member", m))
			r.say("denied", b.Messages.Denied)
			return
		}
		over, err := h.p.overBudget(r.ctx, b, m, in.Sender, r.log.With(zap.String("member", m)))
		if lim := b.Limits.PerUserPerDay; err == nil && !over && lim > 0 {
			var n int
			n, err = h.p.store.DailyCount(r.ctx, m, in.Sender, h.p.now())
			over = n >= lim
		}
		switch {
		case err != nil:
			r.fail("limit", err)
			return
		case over:
			r.log.Info("a panel member's daily limit is reached", zap.String("member", m))
			now := h.p.now()
			r.say("limited", b.Messages.LimitText(store.NextReset(now).Sub(now)))
			return
		}
	}
	speak := pn.Speak
	if speak && h.speaker == nil {
		r.log.Warn("the panel speaks but there is no OpenAI key: its members write instead")
		speak = false
	}
	run := &engine.Run{
		ID: uuid.NewString(), Panel: pn.ID, Chat: in.Key.Chat, Thread: in.Key.Thread, MessageID: in.MessageID, Question: q,
		Starter: in.Sender, StarterName: in.SenderName, Members: slices.Clone(pn.Members), Names: brains, Speak: speak,
		MaxChars: [3]int{pn.MaxChars.Answer, pn.MaxChars.Comment, pn.MaxChars.Reply}, CommentCap: pn.CommentCap,
		Started: time.Now().UTC(),
	}
	run.Seed = engine.NewSeed(run.ID)
	data, err := json.Marshal(run)
	if err == nil {
		err = h.p.store.StartPanel(r.ctx, store.PanelRun{ID: run.ID, Chat: run.Chat, Thread: run.Thread, MessageID: run.MessageID,
			Run: data, Created: run.Started})
	}
	switch {
	case errors.Is(err, store.ErrPanelStarted):
		r.drop("duplicate") // replayed after a restart: the run resumes by itself
		return
	case errors.Is(err, store.ErrPanelBusy):
		r.say("busy", "A panel is already running in this group. Wait for it to end, then ask again.")
		return
	case err != nil:
		r.fail("panel", err)
		return
	}
	// A panel is one request per member against the daily limits.
	for _, m := range pn.Members {
		if _, _, err := h.p.store.TakeDaily(r.ctx, m, in.Sender, 0, h.p.now()); err != nil {
			r.log.Warn("could not count the panel against a member's daily limit", zap.String("member", m), zap.Error(err))
		}
	}
	r.log.Info("panel started", zap.String("panel_run", run.ID), zap.Strings("members", run.Members), zap.Uint64("seed", run.Seed),
		zap.Bool("speak", run.Speak))
	r.sum.outcome = "panel"
	h.run(run)
}

// missing names the members that are not in the chat: not running, or
// not a member of the group as their own client sees it.
func (h *panels) missing(r *request, pn *panel.Panel) []string {
	type check struct {
		name    string
		present bool
	}
	checks := make([]check, len(pn.Members))
	var wg sync.WaitGroup
	for i, m := range pn.Members {
		b := h.brain(m)
		client, me := h.connectedMember(r.ctx, m)
		checks[i].name = m
		if b == nil || client == nil || me.ID == 0 {
			continue
		}
		checks[i].name = b.Name
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
			defer cancel()
			present, err := client.IsMember(ctx, r.in.Key.Chat, me.ID)
			if err != nil {
				r.log.Info("panel member cannot see the group", zap.String("member", m), zap.Error(err))
				return
			}
			checks[i].present = present
		}()
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

// connectedMember returns member bot's client and identity, waiting a
// little for a bot of the brains folder that is still connecting.
func (h *panels) connectedMember(ctx context.Context, bot string) (*telegram.Client, message.Identity) {
	deadline := time.Now().Add(memberConnectWait)
	for {
		client, me := h.member(bot)
		if client != nil && me.ID != 0 || h.brain(bot) == nil || time.Now().After(deadline) {
			return client, me
		}
		select {
		case <-ctx.Done():
			return client, me
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// run runs (or resumes) a panel in the background and writes its summary
// line when it ends.
func (h *panels) run(run *engine.Run) {
	h.launch(func(ctx context.Context) {
		start := time.Now()
		rep, err := h.engine.Run(ctx, run)
		log := h.log.With(zap.String("panel_run", run.ID), zap.String("panel", run.Panel), zap.Int64("chat", run.Chat),
			zap.Int64("user", run.Starter))
		if err != nil {
			log.Info("panel interrupted; it resumes after the restart", zap.Int("turn", run.Turn), zap.Error(err))
			return
		}
		outcome := "ok"
		switch {
		case rep.Answers == 0:
			outcome = "failed"
		case len(rep.SatOut) > 0:
			outcome = "partial"
		}
		h.p.metrics.Panels.WithLabelValues(outcome).Inc()
		// The one summary line of a panel run (docs/operations.md).
		log.Info("panel",
			zap.String("outcome", outcome), zap.Strings("members", run.Members),
			zap.Int("answers", rep.Answers), zap.Int("comments", rep.Comments), zap.Int("replies", rep.Replies),
			zap.Int("dropped_comments", rep.Dropped), zap.Strings("sat_out", rep.SatOut), zap.Uint64("seed", run.Seed),
			zap.Bool("speak", run.Speak), zap.Int("resumes", run.Resumes), zap.Int("sent", rep.Sends),
			zap.Int64("run_ms", time.Since(start).Milliseconds()), zap.Int64("total_ms", time.Since(run.Started).Milliseconds()),
			zap.Float64("cost_usd", rep.CostUSD), zap.Float64("openai_usd", rep.OpenAIUSD),
			zap.String("manifest", filepath.Join(h.dataDir, engine.Folder(run.Chat, run.ID), "run.json")))
	})
}

// resume takes up the runs an earlier process left, once their members'
// bots are connected (or after a minute without them: a member whose bot
// is gone fails its turns and sits out).
func (h *panels) resume(ctx context.Context, stopping <-chan struct{}) {
	resumable, ok := h.p.store.(ResumablePanels)
	if !ok {
		return
	}
	runs, err := resumable.RunningPanels(ctx)
	if err != nil {
		h.log.Error("could not read the panel journal; unfinished panels are not resumed", zap.Error(err))
		return
	}
	for _, pr := range runs {
		var run engine.Run
		if err := json.Unmarshal(pr.Run, &run); err != nil {
			h.log.Error("journaled panel run unreadable; dropped", zap.String("panel_run", pr.ID), zap.Error(err))
			_ = h.p.store.SavePanel(ctx, pr.ID, pr.Run, true, h.p.now())
			continue
		}
		deadline := time.Now().Add(time.Minute)
		for !h.connected(run.Members) && time.Now().Before(deadline) {
			select {
			case <-stopping:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		run.Resumes++
		h.log.Info("resuming panel run", zap.String("panel_run", run.ID), zap.String("panel", run.Panel), zap.Int("turn", run.Turn))
		h.run(&run)
	}
}

func (h *panels) connected(members []string) bool {
	for _, m := range members {
		if c, _ := h.member(m); c == nil {
			return false
		}
	}
	return true
}

// Ask runs one member's turn in a Claude process of its own, in a session
// of its own: a panel leaves the member's conversations in the group and
// in private chats as they were, and no CLI stays warm for it.
func (h *panels) Ask(ctx context.Context, run *engine.Run, q engine.Question) (engine.Answer, error) {
	b := h.brain(q.Member)
	if b == nil {
		return engine.Answer{}, fmt.Errorf("brain %s is gone", q.Member)
	}
	if err := h.p.slots.acquire(ctx, q.Member, h.p.stopping); err != nil {
		if errors.Is(err, errStopping) || ctx.Err() != nil {
			return engine.Answer{}, fmt.Errorf("%w: %w", engine.ErrInterrupted, err)
		}
		return engine.Answer{}, err
	}
	defer h.p.slots.release()
	log := h.log.With(zap.String("panel_run", run.ID), zap.String("bot", q.Member), zap.Int("turn", q.Turn),
		zap.Int64("chat", run.Chat), zap.Int64("user", run.Starter))
	// The group sees who is at work, as for any answer.
	if o, err := h.outbox(run, q.Member, 0); err == nil {
		action := message.Typing
		if run.Speak {
			action = message.RecordVoice
		}
		defer o.KeepAction(ctx, action)()
	}
	res, err := h.p.claude.Run(ctx, claude.Request{
		Mode:         claude.Text,
		Prompt:       q.Prompt,
		SessionID:    uuid.NewString(),
		SystemPrompt: b.SystemPrompt,
		PromptVars: sysprompt.Facts{BotName: b.Name, UserFirstName: run.StarterName, ChatType: "supergroup",
			Now: h.p.now(), Location: b.Location()}.Vars(),
		Model:             b.Claude.Model,
		BotID:             q.Member,
		JSONSchema:        q.Schema,
		MaxBudgetUSD:      b.Claude.MaxBudgetUSD,
		InactivityTimeout: b.Claude.Timeout.D(),
		Log:               log,
	})
	var ans engine.Answer
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	if res != nil {
		ans = engine.Answer{Text: res.Text, Structured: res.Structured, CostUSD: res.CostUSD}
		h.record(ctx, run, q.Member, outcome, res.CostUSD, 0, res.Tokens)
		h.p.metrics.CostUSD.WithLabelValues(q.Member).Add(res.CostUSD)
	}
	return ans, err
}

// record stores what a member's turn cost, for usage reports and caps.
func (h *panels) record(ctx context.Context, run *engine.Run, member, outcome string, claudeUSD, openAIUSD float64, t claude.Tokens) {
	err := h.p.store.RecordUsage(context.WithoutCancel(ctx), store.Usage{
		At: h.p.now(), Bot: member, Chat: run.Chat, User: run.Starter, RequestID: run.ID, Mode: "panel", Outcome: outcome,
		ClaudeUSD: claudeUSD, OpenAIUSD: openAIUSD, InputTokens: t.Input, OutputTokens: t.Output,
		CacheReadTokens: t.CacheRead, CacheWriteTokens: t.CacheWrite,
	})
	if err != nil {
		h.log.Warn("could not record a panel turn's usage", zap.String("panel_run", run.ID), zap.Error(err))
	}
}

// Speak speaks a member's text with its brain's voice settings.
func (h *panels) Speak(ctx context.Context, run *engine.Run, member, text string) ([]byte, string, float64, error) {
	b := h.brain(member)
	if b == nil {
		return nil, "", 0, fmt.Errorf("brain %s is gone", member)
	}
	if h.speaker == nil {
		return nil, "", 0, errors.New("no speech without an OpenAI key")
	}
	data, ext, err := h.speaker.Speak(ctx, text, toolspec.SpeechSettings{Voice: b.TTS.Voice, Speed: b.TTS.Speed, Model: b.TTS.Model, Format: b.TTS.Format})
	if err != nil {
		return nil, "", 0, err
	}
	usd, _ := pricing.Speech(cmp.Or(b.TTS.Model, toolspec.DefaultSpeechModel), utf8.RuneCountInString(text))
	h.record(ctx, run, member, "ok", 0, usd, claude.Tokens{})
	return data, ext, usd, nil
}

// outbox sends as member to the run's chat, replying to message replyTo.
func (h *panels) outbox(run *engine.Run, member string, replyTo int) (Outbox, error) {
	if c, _ := h.member(member); c == nil {
		return nil, fmt.Errorf("bot %s is not connected", member)
	}
	log := h.log.With(zap.String("panel_run", run.ID), zap.String("bot", member))
	return h.p.chats.Outbox(message.Key{Bot: member, Chat: run.Chat, Thread: run.Thread}, true, replyTo, log), nil
}

// Send posts a member's turn: its voice note, or its text.
func (h *panels) Send(ctx context.Context, run *engine.Run, it *engine.Item, replyTo int) (int, error) {
	o, err := h.outbox(run, it.Member, replyTo)
	if err != nil {
		return 0, err
	}
	if run.Speak {
		err = o.File(ctx, message.VoiceNote, filepath.Join(h.dataDir, it.File))
	} else {
		err = o.Text(ctx, it.Text, true)
	}
	if err == nil && len(o.Sent()) == 0 {
		err = errors.New("no message sent")
	}
	if err != nil {
		return 0, err
	}
	return o.Sent()[0], nil
}

// Note posts the panel's closing note, from the first member that can.
func (h *panels) Note(ctx context.Context, run *engine.Run, text string) error {
	for _, m := range run.Members {
		o, err := h.outbox(run, m, run.MessageID)
		if err != nil {
			continue
		}
		return o.Text(ctx, text, false)
	}
	return errors.New("no member bot is connected")
}

// Save journals the run.
func (h *panels) Save(ctx context.Context, run *engine.Run) error {
	data, err := json.Marshal(run)
	if err != nil {
		return err
	}
	return h.p.store.SavePanel(ctx, run.ID, data, !run.Finished.IsZero(), h.p.now())
}
