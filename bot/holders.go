package bot

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/telegram"
	"brainbot/state"
)

// A token stays with the brain that has it. A copied brain file that
// kept its token must not take the bot over: not while the original runs
// (the copy is refused, naming both files), and not after a restart, when
// the copy might be read first. So which brain polled each Telegram bot
// is remembered in the store (the cluster's, in a cluster): at the start
// that brain is read first and keeps its bot (brain.LoadDirHeld), and
// while running, a bot running keeps its token (holderOf).

// holders is which brain has each Telegram bot, by bot number, as the
// store remembers it.
type holders struct {
	mu       sync.Mutex
	byNumber map[string]string
}

// load reads what the store remembers; without it the first brain by
// file name keeps a token, as before anything was remembered.
func (h *holders) load(ctx context.Context, s state.Holders, log *zap.Logger) {
	byNumber, err := s.TelegramBotHolders(ctx)
	if err != nil {
		log.Warn("could not read which brain has each Telegram bot; of two brain files with one token, the first by name keeps it", zap.Error(err))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byNumber = byNumber
}

// holds reports whether brain id has a Telegram bot.
func (h *holders) holds(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, holder := range h.byNumber {
		if holder == id {
			return true
		}
	}
	return false
}

// holderOf returns the brain running the Telegram bot of token, if it is
// another than id's (nil: none). The caller holds m.mu.
func (m *Manager) holderOf(id, token string) *brain.Brain {
	number := telegram.BotNumber(token)
	for other, r := range m.bots {
		if other != id && telegram.BotNumber(r.token) == number {
			return m.brains[other]
		}
	}
	return nil
}

// hold records that brain id runs the Telegram bot of token.
func (m *Manager) hold(ctx context.Context, id, token string, log *zap.Logger) {
	number := telegram.BotNumber(token)
	m.holders.mu.Lock()
	same := m.holders.byNumber[number] == id
	m.holders.mu.Unlock()
	if same {
		return
	}
	if err := m.cfg.State.HoldTelegramBot(ctx, number, id, m.cfg.Now()); err != nil {
		log.Warn("could not record which brain has the Telegram bot; after a restart another file with its token may take it", zap.Error(err))
		return
	}
	m.holders.mu.Lock()
	defer m.holders.mu.Unlock()
	if m.holders.byNumber == nil {
		m.holders.byNumber = map[string]string{}
	}
	m.holders.byNumber[number] = id
}

// retryRefused starts the brains that waited for a token another brain had,
// where that brain let go of it (removed, or given another token). The
// caller holds m.mu.
func (m *Manager) retryRefused(ctx context.Context) (started []string) {
	for id := range m.refused {
		b := m.brains[id]
		if b == nil {
			delete(m.refused, id)
			continue
		}
		token, err := b.ResolveToken(m.cfg.LookupEnv)
		if err != nil || m.holderOf(id, token) != nil {
			continue
		}
		delete(m.refused, id)
		m.applyLocked(ctx, brain.Change{ID: id, Brain: b})
		started = append(started, id)
	}
	return started
}
