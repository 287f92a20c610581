package conversation

// The pipeline as panels see it (host.Pipeline), and /panel answered.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"brainbot/message"
	"brainbot/state"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/bot/panel/host"
	"brainbot/claude"
	"brainbot/metrics"
	"brainbot/sysprompt"
)

// startPanel answers /panel: the panels decide, the request answers.
func (p *Pipeline) startPanel(r *request) {
	outcome, reply, err := p.panels.Start(r.ctx, r.in, r.brain, r.log)
	switch {
	case err != nil:
		r.fail(outcome, err)
	case reply != "":
		r.notice(outcome, reply) // for the one who asked
	default:
		r.drop(outcome) // started ("panel"), or left to another member
	}
}

// PanelPort is the pipeline as the panels see it (host.Pipeline): a
// member's turn admitted, charged, asked and paid for, and the spares kept
// for the next ones. The panels' role is a type of its own, apart from
// the intake's (Serve and its kin on Pipeline): each side sees only what
// it uses.
type PanelPort struct{ p *Pipeline }

// PanelPort is the port the panels stand on.
func (p *Pipeline) PanelPort() PanelPort { return PanelPort{p} }

// Admit checks that user may have bot (brain b) answer now: allowed, and
// within its spending caps and daily limit, looked at but not counted.
// When not, outcome and reply say how to answer ("" when it may).
func (port PanelPort) Admit(ctx context.Context, b *brain.Brain, bot string, user int64, log *zap.Logger) (outcome, reply string, err error) {
	p := port.p
	if !allowed(b, user) {
		return "denied", b.Messages.Denied, nil
	}
	now := p.cfg.Now()
	untilReset := state.NextReset(now).Sub(now)
	switch over, err := p.overBudget(ctx, b, bot, user, log); {
	case err != nil:
		return "", "", err
	case over:
		return outcomeSpendingCap, b.Messages.SpendingCapText(untilReset), nil
	}
	if lim := b.Limits.PerUserPerDay; lim > 0 {
		switch n, err := p.store.DailyCount(ctx, bot, user, now); {
		case err != nil:
			return "", "", err
		case n >= lim:
			return "limited", b.Messages.LimitText(untilReset), nil
		}
	}
	return "", "", nil
}

// Charge counts one request of user against bot's daily limit.
func (port PanelPort) Charge(ctx context.Context, bot string, user int64) error {
	_, _, err := port.p.store.TakeDaily(ctx, bot, user, 0, port.p.cfg.Now())
	return err
}

// Ask runs a panel member's turn in a Claude slot, in a process and a
// session of its own (a spare kept for the member's turns when one is
// ready; nothing is kept warm, and the member's own conversations stay as
// they were), with the group seeing the member at work, and records what
// it cost.
func (port PanelPort) Ask(ctx context.Context, q host.Question) (*claude.Result, error) {
	p := port.p
	if err := p.slots.acquire(ctx, q.Bot, 0, time.Now(), cost{}, p.cfg.Stopping); err != nil {
		if errors.Is(err, errStopping) || ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", host.ErrInterrupted, err)
		}
		return nil, err
	}
	defer p.slots.release()
	action := chatAction(claude.Text)
	if q.Speak {
		action = chatAction(claude.Speech)
	}
	out := p.cfg.Chats.Outbox(message.Key{Bot: q.Bot, Chat: q.Chat, Thread: q.Thread}, true, 0, q.Log)
	defer out.KeepAction(ctx, action)()
	res, err := p.claude.Run(ctx, p.questionRequest(q))
	if res != nil {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		p.recordUsage(ctx, panelUsage(q, outcome, res.CostUSD, 0), res.Tokens, q.Log)
		p.cfg.Metrics.Spent(q.Bot, metrics.ProviderClaude, res.CostUSD)
	}
	return res, err
}

// questionRequest is a panel member's turn as the agent runs it: the one
// place it is made, for a turn (Ask) and for the spares started ahead of
// one (KeepQuestionSpares). Its session is the agent's to name (a spare's
// when one fits).
func (p *Pipeline) questionRequest(q host.Question) claude.Request {
	req := p.baseRequest(q.Brain, q.Bot, q.Prompt, sysprompt.Facts{UserFirstName: q.UserName, ChatType: "supergroup"}, q.Log)
	req.JSONSchema = q.Schema
	req.OnText = q.OnText
	return req
}

// Spent records what a panel member's turn cost outside the model.
func (port PanelPort) Spent(ctx context.Context, q host.Question, openAIUSD float64) {
	p := port.p
	p.recordUsage(ctx, panelUsage(q, "ok", 0, openAIUSD), claude.Tokens{}, q.Log)
	p.cfg.Metrics.Spent(q.Bot, metrics.ProviderOpenAI, openAIUSD)
}

func panelUsage(q host.Question, outcome string, claudeUSD, openAIUSD float64) state.Usage {
	return state.Usage{Bot: q.Bot, Chat: q.Chat, User: q.User, RequestID: q.Run, Mode: "panel", Outcome: outcome,
		ClaudeUSD: claudeUSD, OpenAIUSD: openAIUSD}
}
