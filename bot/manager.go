// Package bot runs the bots of a brains folder: it follows the folder
// (start, restart on a token change, stop), runs each bot's Telegram
// client (connect with backoff, register its commands, poll under the
// bot's lease, or set its webhook), and composes the rooms a message
// crosses: the transport (bot/telegram), the log that keeps updates until
// answered (the state's backend, package state, which cmd chose), the
// intake (bot/intake), the conversation pipeline that answers
// (bot/conversation) and the panels (bot/panel/host).
//
// Brains are looked up per message, so an edited brain file applies to the
// next message; only a changed token restarts that bot's client.
package bot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/conversation"
	"brainbot/bot/intake"
	"brainbot/bot/panel/host"
	"brainbot/bot/telegram"
	"brainbot/message"
	"brainbot/metrics"
	"brainbot/schedule"
	"brainbot/state"
)

// Config is what Run needs. Zero durations and sizes take the defaults noted.
type Config struct {
	// BrainsDir holds the brain files; it is watched for edits.
	BrainsDir string
	// PanelsDir holds the panel files (BRAINBOT_PANELS), read on every
	// /panel, so an edit applies to the next panel.
	PanelsDir string
	// DataDir is BRAINBOT_DATA: the CLI's working folders and the
	// generated files live below it.
	DataDir string
	// APIURL is the Bot API base URL (TELEGRAM_API_URL), default
	// https://api.telegram.org.
	APIURL string
	// MaxClaude caps concurrent Claude requests over all bots
	// (BRAINBOT_MAX_CLAUDE, default 4); the rest wait.
	MaxClaude int
	// QueueSize caps the messages waiting in one conversation besides the
	// one being answered (default 5). Beyond it a message is dropped, and
	// the first one dropped in a burst gets the brain's busy message.
	QueueSize int
	// MaxWaitingPerBot caps one bot's requests waiting for a Claude slot
	// (default 50), and MaxWait how long one waits (default 2m); beyond
	// either the user gets the brain's busy message. Slots go to the bots
	// in turn, so a busy bot cannot starve the others.
	MaxWaitingPerBot int
	MaxWait          time.Duration
	// Grace is how long requests in flight may finish after Run's context
	// ends (default 30s); then they are cancelled.
	Grace time.Duration
	// PollTimeout is the getUpdates long-poll timeout (default 50s).
	PollTimeout time.Duration
	// StreamEvery is how often a streamed text reply is updated after its
	// first text shows (default 1s: about Telegram's edit limit).
	StreamEvery time.Duration
	// ChatActionEvery is how often the typing/recording/uploading status is
	// resent while a request runs (default 4s; Telegram shows it ~5s).
	ChatActionEvery time.Duration
	// RetryMin and RetryMax bound the backoff between restarts of a bot
	// whose token is rejected or polled elsewhere (default 1s and 5m), and
	// RetryMin is the first wait after a transient network error.
	RetryMin, RetryMax time.Duration

	Claude conversation.Agent
	// Warmer starts Claude's processes ahead of messages (the driver, as
	// Claude is; nil: none). Spares is how many each bot keeps started
	// ahead of its new conversations (BRAINBOT_SPARES); 0: none. Members
	// of panels keep theirs for their turns too.
	Warmer conversation.Warmer
	Spares int
	// PrewarmWithin and PrewarmMax: at the start, the conversations active
	// within PrewarmWithin before it, at most PrewarmMax of them (the most
	// recent), get their Claude process started ahead of their next
	// message, and so do those that come from another instance
	// (state.Arrivals), while the warm budget has room, with a Warmer.
	// Zero: none.
	PrewarmWithin time.Duration
	PrewarmMax    int
	// Transcriber turns voice messages into text; nil (no OpenAI key)
	// answers them with the brain's messages.text_only.
	Transcriber conversation.Transcriber
	// Speaker speaks the members of panels that speak, and answers read
	// aloud (buttons.read_aloud); nil (no OpenAI key): they write, and
	// answers get no 🔊.
	Speaker Speaker
	// FileAfterTurn sends a voice note or picture once the model's turn
	// is over rather than as soon as its tool reports the file
	// (BRAINBOT_SPEECH_EARLY=off: the flow before 2026-11, to compare).
	FileAfterTurn bool
	// SpeakEarly speaks panel members' turns while the model writes
	// them; nil (no OpenAI key, or BRAINBOT_SPEECH_EARLY=off): once they
	// are written, with Speaker.
	SpeakEarly host.SpeakEarly
	// State keeps the bots' updates until answered and their state
	// (sessions, toggles, counters, usage, buttons, panel runs,
	// transcripts), and says which instance polls each bot: one process's
	// (state/sqlite) or instances' sharing the bots (state/jetstream).
	State state.Backend
	// WebhookURL has Telegram post updates to <WebhookURL>/<bot id>
	// (served by WebhookHandler) instead of the bots polling.
	WebhookURL string
	Log        *zap.Logger
	// Metrics receives the bots' metrics (a private set when nil).
	Metrics *metrics.Metrics
	// LookupEnv resolves brains' token_env and the ${VAR} references of
	// their MCP servers (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// OnSecret, if set, is called with every secret as soon as it is
	// resolved, before it could reach any log: each bot token (from the
	// environment or inline) and each value a brain's MCP server
	// references. The caller masks them in its log output.
	OnSecret func(secret string)
	// Now is the clock for daily limits (default time.Now).
	Now func() time.Time
}

// Manager runs the bots of a brains folder: it starts, restarts and stops
// their Telegram clients as brains change, and queues their messages for
// the pipeline.
type Manager struct {
	cfg       Config
	log       *zap.Logger
	transport *telegram.Transport
	intake    *intake.Intake
	// scheduler hands the reminders and check-ins due to the log.
	scheduler *schedule.Scheduler
	pipeline  *conversation.Pipeline
	panels    *host.Host

	mu     sync.Mutex
	brains map[string]*brain.Brain
	// known are the brains each bot had last: a message taken in is
	// answered with it even if its brain is removed meanwhile.
	known map[string]*brain.Brain
	bots  map[string]*runner
	// clients are the bots' Telegram clients, the last one each bot
	// connected with: replies in flight go out through it while the bot
	// reconnects, or after it was stopped.
	clients map[string]*telegram.Client
	// holders is which brain has each Telegram bot; refused are the
	// brains not started because a running one has their token.
	holders holders
	refused map[string]bool
	// notStarted says why each bot with a brain but no client has none
	// (no token, or another brain's); problems are the brain files with
	// problems (file → them), for Status.
	notStarted map[string]error
	problems   map[string]error

	// stopping is closed when Run's context ends: no new work starts.
	stopping chan struct{}
	// workCtx is what requests run under; cancelled after the grace period.
	workCtx    context.Context
	cancelWork context.CancelFunc
	work       sync.WaitGroup // drain goroutines and replies in flight
	pollers    sync.WaitGroup
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.BrainsDir == "":
		return nil, errors.New("bot: Config.BrainsDir is empty")
	case cfg.DataDir == "":
		return nil, errors.New("bot: Config.DataDir is empty")
	case cfg.Claude == nil:
		return nil, errors.New("bot: Config.Claude is nil")
	case cfg.State == nil:
		return nil, errors.New("bot: Config.State is nil")
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("bot: data dir: %w", err)
	}
	cfg.DataDir = dataDir
	setDefault(&cfg.APIURL, "https://api.telegram.org")
	setDefault(&cfg.MaxClaude, 4)
	setDefault(&cfg.QueueSize, 5)
	setDefault(&cfg.MaxWaitingPerBot, 50)
	setDefault(&cfg.MaxWait, 2*time.Minute)
	setDefault(&cfg.Grace, 30*time.Second)
	setDefault(&cfg.PollTimeout, 50*time.Second)
	setDefault(&cfg.ChatActionEvery, 4*time.Second)
	setDefault(&cfg.StreamEvery, time.Second)
	setDefault(&cfg.RetryMin, time.Second)
	setDefault(&cfg.RetryMax, 5*time.Minute)
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	workCtx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg:        cfg,
		log:        cfg.Log,
		brains:     map[string]*brain.Brain{},
		known:      map[string]*brain.Brain{},
		bots:       map[string]*runner{},
		clients:    map[string]*telegram.Client{},
		refused:    map[string]bool{},
		notStarted: map[string]error{},
		stopping:   make(chan struct{}),
		workCtx:    workCtx,
		cancelWork: cancel,
	}
	m.transport = telegram.New(telegram.Settings{APIURL: cfg.APIURL, PollTimeout: cfg.PollTimeout, RetryMin: cfg.RetryMin,
		ActionEvery: cfg.ChatActionEvery, StreamEvery: cfg.StreamEvery, Metrics: cfg.Metrics})
	m.pipeline = conversation.New(conversation.Config{
		DataDir: cfg.DataDir, State: cfg.State, Agent: cfg.Claude, Chats: chats{m}, Brain: m.knownBrain,
		Transcriber: cfg.Transcriber, Speaker: cfg.Speaker, FileAfterTurn: cfg.FileAfterTurn,
		MaxClaude: cfg.MaxClaude, MaxWaitingPerBot: cfg.MaxWaitingPerBot, MaxWait: cfg.MaxWait, QueueSize: cfg.QueueSize,
		Panels: panelsPort{m}, Queues: queuesPort{m},
		Warmer: cfg.Warmer, Spares: cfg.Spares, Stopping: m.stopping, LookupEnv: cfg.LookupEnv, OnSecret: cfg.OnSecret, Now: cfg.Now, Metrics: cfg.Metrics, Log: cfg.Log,
	})
	m.panels = host.New(host.Config{
		Dir: cfg.PanelsDir, DataDir: cfg.DataDir, Pipeline: m.pipeline.PanelPort(), Members: members{m}, Runs: cfg.State, Brain: m.brain,
		Speaker: cfg.Speaker, SpeakEarly: cfg.SpeakEarly, Launch: m.launch, Now: cfg.Now, Metrics: cfg.Metrics, Log: cfg.Log,
	})
	m.intake = intake.New(intake.Config{
		QueueSize: cfg.QueueSize,
		Groups: func(bot string) string {
			if b := m.brain(bot); b != nil {
				return b.Groups
			}
			return ""
		},
		Decode:   telegram.Decode,
		Handler:  m.pipeline,
		Work:     &m.work,
		Ctx:      workCtx,
		Stopping: m.stopping,
		Metrics:  cfg.Metrics,
		Log:      cfg.Log,
	})
	m.scheduler = schedule.New(schedule.Config{Log: cfg.State, Store: cfg.State, Brain: m.brain, Bots: m.botIDs,
		Now: cfg.Now, Logger: cfg.Log})
	return m, nil
}

// botIDs lists the bots with a brain now.
func (m *Manager) botIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.brains))
}

// Wake tells the scheduler a reminder kept here comes due at at.
func (m *Manager) Wake(at time.Time) { m.scheduler.Wake(at) }

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Run starts a bot for every valid brain with a token, follows edits of
// the brains folder, and serves until ctx ends. Then it stops polling, lets
// requests in flight finish within Config.Grace, cancels the rest (their
// updates go back to the log, which hands them out again: the next start,
// or another instance) and returns nil. It
// returns an error only if the brains folder cannot be watched. A Manager
// runs once.
func (m *Manager) Run(ctx context.Context) error {
	pollCtx, stopPolling := context.WithCancel(ctx)
	m.pollers.Add(1)
	go func() {
		defer m.pollers.Done()
		m.pruneStore(pollCtx)
	}()
	m.cfg.State.Consume(pollCtx, m.intake.Deliver)
	// Every instance looks for what came due: the log keeps each once.
	m.pollers.Add(1)
	go func() {
		defer m.pollers.Done()
		m.scheduler.Run(pollCtx)
	}()
	// A forget done through another instance is done here too: its warm
	// CLIs end, its transcripts and files on this machine go.
	m.pollers.Add(1)
	go func() {
		defer m.pollers.Done()
		m.cfg.State.WatchForgets(pollCtx, func(f state.Forgotten) {
			here := m.pipeline.ForgetHere(pollCtx, f)
			m.log.Info("user forgotten through another instance", zap.String("bot", f.Bot), zap.Int64("user", f.User),
				zap.Int("conversations", len(f.Conversations)), zap.Int("transcripts", here.Transcripts), zap.Int("files", here.Files),
				zap.Int("unanswered", here.Unanswered))
		})
	}()
	// Conversations that come from another instance (it died or stopped)
	// have their processes started at once, as the start-up prewarm
	// does: their next message comes soon, and here.
	if m.cfg.PrewarmWithin > 0 {
		m.pollers.Add(1)
		go func() {
			defer m.pollers.Done()
			since := func() time.Time { return m.cfg.Now().Add(-m.cfg.PrewarmWithin) }
			m.cfg.State.WatchArrivals(pollCtx, since, m.cfg.PrewarmMax, func(moved []state.RecentSession) {
				m.pipeline.PrewarmMoved(pollCtx, moved)
			})
		}()
	}
	m.panels.Report()
	m.launch(func(context.Context) { m.resumePanels(pollCtx) })
	m.holders.load(pollCtx, m.cfg.State, m.log)
	// Once the brains are known, the conversations of the last run that
	// were active most recently have their processes started.
	prewarm := func() {
		if m.cfg.PrewarmWithin <= 0 {
			return
		}
		m.launch(func(ctx context.Context) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { // a stop ends it at once: it is no request to finish
				select {
				case <-m.stopping:
					cancel()
				case <-ctx.Done():
				}
			}()
			m.pipeline.Prewarm(ctx, m.cfg.Now().Add(-m.cfg.PrewarmWithin), m.cfg.PrewarmMax)
		})
	}
	w := brain.Watcher{Dir: m.cfg.BrainsDir, Log: m.log, Held: m.holders.holds, Loaded: prewarm,
		Problems: m.brainProblems}
	err := w.Run(pollCtx, func(c brain.Change) { m.apply(pollCtx, c) })

	stopPolling()
	close(m.stopping)
	m.pollers.Wait()
	m.intake.Stop()

	drained := make(chan struct{})
	go func() { m.work.Wait(); close(drained) }()
	grace := time.NewTimer(m.cfg.Grace)
	defer grace.Stop()
	select {
	case <-drained:
	case <-grace.C:
		m.log.Warn("grace period over: cancelling requests still running; they will be replayed on the next start",
			zap.Duration("grace_ms", m.cfg.Grace))
		m.cancelWork()
		<-drained
	}
	m.cancelWork()
	if err != nil {
		return fmt.Errorf("bot: %w", err)
	}
	return nil
}

// Forget deletes what is kept of user's with bot ("": every bot), on an
// admin's word, as the user's own /forget does.
func (m *Manager) Forget(ctx context.Context, bot string, user int64) (state.Forgotten, error) {
	return m.pipeline.Forget(ctx, bot, user, "admin")
}

// resumePanels takes up the panel runs an earlier process left, and then,
// every panelCheckEvery, those of instances that died meanwhile (in a
// cluster), until the bots stop.
func (m *Manager) resumePanels(ctx context.Context) {
	m.panels.Resume(ctx, m.stopping)
	tick := time.NewTicker(panelCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-m.stopping:
			return
		case <-tick.C:
			m.panels.Resume(ctx, m.stopping)
		}
	}
}

// panelCheckEvery is how often an instance looks for panel runs of
// instances gone.
const panelCheckEvery = 2 * time.Second

// pruneEvery is how often the store drops what its retention no longer
// keeps (old daily counters and ended sessions).
const pruneEvery = time.Hour

// pruneStore prunes the store now and every pruneEvery until ctx ends.
func (m *Manager) pruneStore(ctx context.Context) {
	tick := time.NewTicker(pruneEvery)
	defer tick.Stop()
	for {
		p, err := m.cfg.State.Prune(ctx, m.cfg.Now(), state.DefaultRetention)
		switch {
		case err != nil && ctx.Err() == nil:
			m.log.Warn("could not prune the store", zap.Error(err))
		case p.Daily+p.History+p.Usage+p.Buttons > 0:
			m.log.Info("pruned the store", zap.Int64("daily_counters", p.Daily), zap.Int64("ended_sessions", p.History),
				zap.Int64("usage_records", p.Usage), zap.Int64("buttons", p.Buttons))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// apply follows one brains-folder change: start, restart or stop that bot,
// and start a bot that waited for the token it let go of.
func (m *Manager) apply(ctx context.Context, c brain.Change) {
	var started []string
	defer func() { // once m.mu is released below: keepSpares reads the brains
		for _, id := range append(started, c.ID) {
			m.keepSpares(id)
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyLocked(ctx, c)
	started = m.retryRefused(ctx)
}

func (m *Manager) applyLocked(ctx context.Context, c brain.Change) {
	log := m.log.With(zap.String("bot", c.ID))
	old := m.bots[c.ID]
	delete(m.notStarted, c.ID)
	if c.Brain == nil {
		m.cfg.Metrics.SpendingCap.DeleteLabelValues(c.ID)
		delete(m.brains, c.ID)
		if old != nil {
			delete(m.bots, c.ID)
			m.stopRunner(old)
			log.Info("bot stopped: brain removed")
		}
		return
	}
	m.brains[c.ID], m.known[c.ID] = c.Brain, c.Brain
	m.cfg.Metrics.SpendingCap.WithLabelValues(c.ID).Set(c.Brain.Limits.DailyUSD)
	token, err := c.Brain.ResolveToken(m.cfg.LookupEnv)
	if err != nil {
		var noToken *brain.NoTokenError
		errors.As(err, &noToken) // else a token file that cannot be read: its error says which
		log.Warn("bot not started: no token", zap.Error(err), zap.String("fix", noTokenFix(noToken)))
		m.notStarted[c.ID] = fmt.Errorf("no token: %w", err)
		if old != nil {
			delete(m.bots, c.ID)
			m.stopRunner(old)
		}
		return
	}
	if m.cfg.OnSecret != nil {
		m.cfg.OnSecret(token)
	}
	if holder := m.holderOf(c.ID, token); holder != nil {
		held := brain.SameToken(c.Brain, holder)
		if !m.refused[c.ID] {
			log.Error("brain file has problems; bot not started", zap.String("file", c.Brain.Path), zap.Error(held))
		}
		m.notStarted[c.ID] = held
		m.refused[c.ID] = true
		if old != nil {
			delete(m.bots, c.ID)
			m.stopRunner(old)
		}
		return
	}
	delete(m.refused, c.ID)
	m.hold(ctx, c.ID, token, log)
	if old != nil && old.token == token {
		old.brainChanged()
		return
	}
	if old != nil {
		m.stopRunner(old)
		log.Info("bot restarting: token changed")
	}
	r := m.newRunner(c.ID, token)
	m.bots[c.ID] = r
	m.pollers.Add(1)
	go func() {
		defer m.pollers.Done()
		r.run(ctx)
	}()
}

// noTokenFix is what makes a bot without a token start (nil: its token
// file cannot be read).
func noTokenFix(e *brain.NoTokenError) string {
	if e == nil {
		return "make the token file readable by brainbot, then save the brain file again"
	}
	return e.Fix
}

// keepSpares has the Claude processes started ahead of bot's new
// conversations and panel turns follow its brain: kept, of the shape its
// brain gives them, while the bot runs and Telegram takes its token;
// ended once it stops, or its token is rejected.
func (m *Manager) keepSpares(bot string) {
	m.mu.Lock()
	b, r := m.brains[bot], m.bots[bot]
	m.mu.Unlock()
	running := r != nil && !r.rejected.Load()
	if running {
		m.pipeline.KeepSpares(bot, b)
		m.panels.KeepSpares(bot)
		return
	}
	m.pipeline.DropSpares(bot)
	m.panels.DropSpares(bot)
}

// stopRunner stops r's polling; its updates wait until the bot is
// connected again. Requests it already took in go on.
func (m *Manager) stopRunner(r *runner) {
	r.stop()
	m.intake.Gone(r.id)
}

// brain returns the current brain of bot id (nil once removed).
func (m *Manager) brain(id string) *brain.Brain {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.brains[id]
}

// knownBrain returns the brain bot id had last (nil if it never had one).
func (m *Manager) knownBrain(id string) *brain.Brain {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.known[id]
}

// Ready reports whether every bot polls Telegram: each has had an answer
// from getUpdates within a long poll and a margin, or, where updates come
// by webhook or another instance polls it, is connected; and Telegram has
// not refused its token since. The error names the bots that are not.
func (m *Manager) Ready() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	window := m.cfg.PollTimeout + 30*time.Second
	var stale []string
	for id, r := range m.bots {
		if r.rejected.Load() {
			stale = append(stale, id+" (token rejected)")
			continue
		}
		if !r.polling.Load() {
			// Posted to, or polled elsewhere: connected is enough.
			if client, _ := r.current(); client == nil {
				stale = append(stale, id)
			}
			continue
		}
		if last := r.lastPoll.Load(); last == 0 || time.Since(time.Unix(0, last)) > window {
			stale = append(stale, id)
		}
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		return fmt.Errorf("not polling Telegram: %s", strings.Join(stale, ", "))
	}
	return nil
}

// client returns the client bot id last connected with (nil if it never
// did).
func (m *Manager) client(id string) *telegram.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clients[id]
}

// connected records that bot id connected with client, as me: its
// updates are routed from now on.
func (m *Manager) connected(id string, client *telegram.Client, me message.Identity) {
	m.mu.Lock()
	m.clients[id] = client
	m.mu.Unlock()
	m.intake.Ready(id, me)
}

// webhookURL is where Telegram posts bot id's updates.
func (m *Manager) webhookURL(id string) string {
	return strings.TrimRight(m.cfg.WebhookURL, "/") + "/" + id
}

// launch runs fn as work of the Manager: Run's shutdown waits for it
// within the grace period, then cancels its context.
func (m *Manager) launch(fn func(ctx context.Context)) {
	m.work.Add(1)
	go func() {
		defer m.work.Done()
		fn(m.workCtx)
	}()
}
