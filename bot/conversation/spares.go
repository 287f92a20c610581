package conversation

// Spares: Claude processes the agent starts ahead of a new conversation
// or a panel member's turn, of the very shape its request will have.

import (
	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/panel/host"
	"brainbot/sysprompt"
)

// KeepSpares has the agent keep Config.Spares processes started for bot's
// new conversations, of the shape brain b gives their requests: at the
// bot's start, and again on each edit of its brain (a changed shape
// replaces them, an unchanged one keeps them). Its guest answers, of
// another shape (no question tool), keep spares of their own beside them
// (claude.Driver.KeepSpares).
func (p *Pipeline) KeepSpares(bot string, b *brain.Brain) {
	if p.warmer == nil || p.cfg.Spares <= 0 {
		return
	}
	log := p.log.With(zap.String("bot", bot))
	if err := p.warmer.KeepSpares(bot, p.conversationRequest(b, bot, sysprompt.Facts{}, log), p.cfg.Spares); err != nil {
		log.Warn("no spare Claude processes for the bot's new conversations", zap.Error(err))
	}
}

// DropSpares ends the processes kept for bot's new conversations: its
// brain is gone.
func (p *Pipeline) DropSpares(bot string) {
	if p.warmer != nil {
		p.warmer.DropSpares(bot)
	}
}

// KeepQuestionSpares has the agent keep n processes started, under the
// name set, for panel questions of q's shape (its member, brain and
// schema; the prompt does not count); n 0 ends them.
func (port PanelPort) KeepQuestionSpares(set string, q host.Question, n int) {
	p := port.p
	switch {
	case p.warmer == nil:
	case n <= 0 || p.cfg.Spares <= 0:
		p.warmer.DropSpares(set)
	default:
		if err := p.warmer.KeepSpares(set, p.questionRequest(q), n); err != nil {
			p.log.Warn("no spare Claude processes for the member's panel turns", zap.String("bot", q.Bot), zap.String("spares", set), zap.Error(err))
		}
	}
}
