package conversation

// The prewarm after a start, and after conversations came from another
// instance: the conversations most recently active get their Claude
// process started ahead of their next message.

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"brainbot/claude"
	"brainbot/state"
	"brainbot/sysprompt"
)

// prewarmPace spaces the starts: each CLI takes about half a second of
// CPU to start, and the bots' spares start at the same time.
const prewarmPace = 200 * time.Millisecond

// Prewarm starts the processes of the conversations active since, the
// most recent first and at most limit, so that their next message, the
// first since brainbot started, finds its conversation warm rather than
// waiting for a CLI to resume it (prewarmAll). It returns how many it
// started.
func (p *Pipeline) Prewarm(ctx context.Context, since time.Time, limit int) int {
	if p.warmer == nil || limit <= 0 {
		return 0
	}
	list, err := p.store.RecentSessions(ctx, since, limit)
	if err != nil {
		p.log.Warn("no prewarm of recent conversations: their sessions cannot be read", zap.Error(err))
		return 0
	}
	n := p.prewarmAll(ctx, list)
	p.log.Info("recent conversations prewarmed", zap.Int("prewarmed", n.started), zap.Int("already_warm", n.warm),
		zap.Int("recent", len(list)), zap.Time("since", since))
	return n.started
}

// PrewarmMoved starts the processes of the conversations that came to
// this instance from another (state.Arrivals), listed the most recent
// first, as Prewarm does: their next message, the first here, finds its
// conversation warm. It returns how many it started.
func (p *Pipeline) PrewarmMoved(ctx context.Context, moved []state.RecentSession) int {
	if p.warmer == nil {
		return 0
	}
	n := p.prewarmAll(ctx, moved)
	p.log.Info("moved conversations prewarmed", zap.Int("prewarmed", n.started), zap.Int("already_warm", n.warm),
		zap.Int("moved", len(moved)))
	return n.started
}

// prewarmed counts what prewarmAll did: the processes it started, and
// the conversations that had one already.
type prewarmed struct{ started, warm int }

// prewarmAll starts the processes of list's conversations in order,
// paced, each transcript restored first (in a cluster, from where it is
// stored), but for those that have a process here already. It stops when
// the agent's budget is full or ctx ends.
func (p *Pipeline) prewarmAll(ctx context.Context, list []state.RecentSession) prewarmed {
	var n prewarmed
	for _, r := range list {
		if p.warmer.HasProcess(r.Conversation.String()) {
			n.warm++
			continue
		}
		if n.started > 0 && !sleep(ctx, prewarmPace) {
			break
		}
		err := p.prewarm(ctx, r)
		if errors.Is(err, claude.ErrNoRoom) {
			break
		}
		if err != nil {
			p.log.Warn("conversation not prewarmed", zap.String("bot", r.Conversation.Bot), zap.Int64("chat", r.Conversation.Chat),
				zap.Error(err))
			continue
		}
		n.started++
	}
	return n
}

// prewarm starts one conversation's process, resuming its session, with
// the request its brain gives it now.
func (p *Pipeline) prewarm(ctx context.Context, r state.RecentSession) error {
	bot := r.Conversation.Bot
	b := p.cfg.Brain(bot)
	if b == nil {
		return errors.New("its bot has no brain")
	}
	release := func() { p.claude.End(r.Conversation.String()) }
	if err := p.store.Restore(ctx, bot, r.ID, release); err != nil {
		return err
	}
	log := p.log.With(zap.String("bot", bot), zap.Int64("chat", r.Conversation.Chat))
	req := p.conversationRequest(b, bot, sysprompt.Facts{}, log)
	req.SessionID, req.Resume, req.Conversation = r.ID, true, r.Conversation.String()
	return p.warmer.PrewarmResume(req)
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
