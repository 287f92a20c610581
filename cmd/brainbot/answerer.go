package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/bot"
	"brainbot/bot/conversation"
	"brainbot/claude"
	mcpserver "brainbot/mcp"
	"brainbot/message"
	"brainbot/reaper"
	"brainbot/state"
	"brainbot/ticket"
	"brainbot/toolspec"
	"brainbot/transcribe"
)

// answerer is what answers messages behind any transport: our MCP tools,
// served to the CLIs on loopback, the Claude driver that starts them,
// the reaper of what they leave, and the OpenAI clients. run and chat
// start it alike, so a chat in the terminal meets the same tools, CLI
// flags and limits as a Telegram user.
type answerer struct {
	driver *claude.Driver
	// transcriber and speaker are nil without an OpenAI key: voice
	// messages in then get the brain's messages.text_only, and no answer
	// is read aloud.
	transcriber conversation.Transcriber
	speaker     bot.Speaker
	bare        bool
	toolsURL    string
	// tools serves the MCP tools; its memory tools keep their notes in
	// the backend once it is open (UseNotes).
	tools *mcpserver.HTTPServer
	// close stops it all, the driver first.
	close func()
	// speakEarly speaks a voice answer or a panel member's turn while
	// the model writes it; nil when speech is not early.
	speakEarly func(context.Context, toolspec.SpeechSettings) claude.Utterance
}

// startAnswerer starts the answerer on cfg; close it when the bots
// stopped. waiting says how many requests wait for a Claude slot (nil:
// none ever does), for the spares to yield to them.
func (m *Main) startAnswerer(cfg Config, log *zap.Logger, waiting func() int) (*answerer, error) {
	e := &answerer{}
	var closers []func()
	fail := func(err error) (*answerer, error) {
		for _, c := range closers {
			c()
		}
		return nil, err
	}
	// The tools are served from this process to the CLIs the driver
	// starts, on loopback; a call is served only for the ticket the driver
	// opens in the request's turn two (package ticket). Stopped after the
	// bots.
	tickets := ticket.NewRegistry()
	tools, err := mcpserver.ListenHTTP(mcpserver.Config{
		DataDir: cfg.DataDir,
		OpenAI:  openAIConfig(cfg),
		Log:     log.Named("tools"),
	}, tickets, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.toolsURL, e.tools = tools.URL, tools
	closers = append(closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), toolsStopGrace)
		defer cancel()
		if err := tools.Shutdown(ctx); err != nil {
			log.Warn("the MCP tool server did not stop cleanly", zap.Error(err))
		}
	})

	// Every CLI dies with brainbot (a parent-death signal), and what a CLI
	// leaves behind, detached or not, is brainbot's to reap and, at the
	// stop, to end. Closed after the driver.
	procs, err := reaper.New(true)
	if err != nil {
		return fail(err)
	}
	closers = append([]func(){func() {
		if n := procs.Close(); n > 0 {
			log.Info("ended the processes the Claude CLIs left behind", zap.Int("processes", n))
		}
	}}, closers...)
	// Voice messages in need the key; without it they get the brain's
	// messages.text_only, and nothing is spoken early or read aloud.
	var speaker *mcpserver.Speaker
	if cfg.OpenAIKey != "" {
		e.transcriber = transcribe.New(openAIConfig(cfg))
		speaker = mcpserver.NewSpeaker(mcpserver.Config{DataDir: cfg.DataDir, OpenAI: openAIConfig(cfg), Log: log.Named("speech")})
		e.speaker = speaker
	}
	e.speakEarly = speakEarly(cfg, speaker)
	e.bare = claudeBare(cfg.ClaudeBare, m.getenv)
	e.driver, err = claude.New(claude.Config{
		Command:  cfg.ClaudeCmd,
		DataDir:  cfg.DataDir,
		ToolsURL: tools.URL,
		Tickets:  tickets,
		Launcher: m.Executable,
		Environ:  m.Environ, // the env file's variables too, as doctor checked them
		Reaper:   procs,
		Bare:     e.bare,
		Warm: claude.WarmConfig{Max: cfg.MaxWarm, Idle: cfg.WarmIdle, Spares: cfg.Spares, SpareIdle: cfg.SpareIdle,
			SpareMemoryMB: sparesMemoryMB(cfg), Memory: boxMemory},
		Waiting: waiting,
		Speak:   e.speakEarly,
		Log:     log.Named("claude"),
	})
	if err != nil {
		return fail(err)
	}
	// After the bots stop: their requests are over, their warm CLIs end.
	closers = append([]func(){e.driver.Close}, closers...)

	e.close = sync.OnceFunc(func() {
		for _, c := range closers {
			c()
		}
	})
	return e, nil
}

// toolsStopGrace bounds the tool server's shutdown. It comes after the
// bots have stopped, so only a call whose CLI is already gone can be left.
const toolsStopGrace = 5 * time.Second

// speakEarly is the driver's Config.Speak: answers are spoken while they
// are written, unless there is no speaker (no OpenAI key) or
// BRAINBOT_SPEECH_EARLY is off.
func speakEarly(cfg Config, s *mcpserver.Speaker) func(context.Context, toolspec.SpeechSettings) claude.Utterance {
	if s == nil || cfg.SpeechEarly == "off" {
		return nil
	}
	return func(ctx context.Context, settings toolspec.SpeechSettings) claude.Utterance {
		return s.Begin(ctx, settings)
	}
}

// notebook keeps the memory tools' notes in the backend.
type notebook struct{ state.Memories }

// Remember keeps a note, saying a full notebook in the tool side's words.
func (n notebook) Remember(ctx context.Context, bot string, user int64, text string, limit int, now time.Time) (string, error) {
	note, err := n.AddNote(ctx, bot, user, text, limit, now)
	if errors.Is(err, state.ErrNotesFull) {
		return "", fmt.Errorf("%w: %w", mcpserver.ErrNotesFull, err)
	}
	return note.ID, err
}

// Forget drops a note.
func (n notebook) Forget(ctx context.Context, bot string, user int64, id string) (bool, error) {
	return n.DropNote(ctx, bot, user, id)
}

// schedule keeps the schedule tools' reminders and zones in the backend,
// and wakes the scheduler for a reminder sooner than its next round.
type schedule struct {
	store interface {
		state.Reminders
		state.Contacts
	}
	wake func(at time.Time)
}

// Remind keeps a reminder in user's private chat with bot.
func (s schedule) Remind(ctx context.Context, bot string, user int64, text string, due time.Time, limit int, now time.Time) (string, error) {
	r, err := s.store.AddReminder(ctx, state.Reminder{Key: message.Key{Bot: bot, Chat: user}, User: user, Text: text, Due: due, Created: now}, limit)
	if errors.Is(err, state.ErrRemindersFull) {
		return "", fmt.Errorf("%w: %w", mcpserver.ErrRemindersFull, err)
	}
	if err == nil {
		s.wake(due)
	}
	return r.ID, err
}

// Pending lists user's reminders with bot.
func (s schedule) Pending(ctx context.Context, bot string, user int64) ([]mcpserver.PendingReminder, error) {
	rs, err := s.store.Reminders(ctx, bot, user)
	pending := make([]mcpserver.PendingReminder, len(rs))
	for i, r := range rs {
		pending[i] = mcpserver.PendingReminder{ID: r.ID, Text: r.Text, Due: r.Due}
	}
	return pending, err
}

// Cancel cancels one.
func (s schedule) Cancel(ctx context.Context, bot string, user int64, id string) (bool, error) {
	return s.store.CancelReminder(ctx, bot, user, id)
}

// TimeZone is the zone user set with bot ("": none).
func (s schedule) TimeZone(ctx context.Context, bot string, user int64) (string, error) {
	c, _, err := s.store.Contact(ctx, bot, user)
	return c.Zone, err
}

// SetTimeZone keeps it.
func (s schedule) SetTimeZone(ctx context.Context, bot string, user int64, zone string) error {
	return s.store.SetTimeZone(ctx, bot, user, zone)
}
