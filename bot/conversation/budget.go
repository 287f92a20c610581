package conversation

// The daily spending caps (limits.daily_usd, limits.per_user_daily_usd).

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/state"
)

// outcomeSpendingCap is the outcome of a message refused because a
// spending cap is reached.
const outcomeSpendingCap = "spending cap"

// budgetWarnings remembers which bots' admins heard today that the daily
// spending cap was reached.
type budgetWarnings struct {
	mu     sync.Mutex
	warned map[string]string // bot → UTC day
}

// firstToday reports whether bot's cap is reached for the first time on
// now's UTC day, and remembers it.
func (w *budgetWarnings) firstToday(bot string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	day := now.UTC().Format(time.DateOnly)
	if w.warned[bot] == day {
		return false
	}
	if w.warned == nil {
		w.warned = map[string]string{}
	}
	w.warned[bot] = day
	return true
}

// withinBudget reports whether the bot, and the user, may still spend
// today (limits.daily_usd, limits.per_user_daily_usd); false means the
// user got messages.spending_cap.
func (p *Pipeline) withinBudget(r *request) bool {
	over, err := p.overBudget(r.ctx, r.brain, r.in.Key.Bot, r.in.Sender, r.log)
	switch {
	case err != nil:
		r.fail("budget", err)
	case over:
		now := p.cfg.Now()
		r.notice(outcomeSpendingCap, r.brain.Messages.SpendingCapText(state.NextReset(now).Sub(now)))
	}
	return err == nil && !over
}

// overBudget reports whether bot (brain b) has spent its daily cap today,
// in all or on user. The admin hears of a bot's cap once a day.
func (p *Pipeline) overBudget(ctx context.Context, b *brain.Brain, bot string, user int64, log *zap.Logger) (bool, error) {
	s, err := p.spending(ctx, b, bot, user)
	if err != nil {
		return false, err
	}
	if s.botCap > 0 && s.botSpent >= s.botCap || s.userCap > 0 && s.userSpent >= s.userCap {
		p.warnCapReached(b, bot, s, log)
		return true, nil
	}
	return false, nil
}

// spending is what bot (brain b), and user, spent today against the
// caps b sets; a cap not set is not looked up.
func (p *Pipeline) spending(ctx context.Context, b *brain.Brain, bot string, user int64) (spending, error) {
	s := spending{botCap: b.Limits.DailyUSD, userCap: b.Limits.PerUserDailyUSD}
	now := p.cfg.Now()
	var err error
	if s.botCap > 0 {
		if s.botSpent, err = p.store.SpentToday(ctx, bot, 0, now); err != nil {
			return s, err
		}
	}
	if s.userCap > 0 {
		s.userSpent, err = p.store.SpentToday(ctx, bot, user, now)
	}
	return s, err
}

// warnCapReached tells the admin, once a day, that bot's own cap is
// reached (s: a cap is).
func (p *Pipeline) warnCapReached(b *brain.Brain, bot string, s spending, log *zap.Logger) {
	if s.botCap > 0 && s.botSpent >= s.botCap && p.budgets.firstToday(bot, p.cfg.Now()) {
		log.Warn("daily spending cap reached: the bot answers no more messages today",
			zap.String("setting", "limits.daily_usd"), zap.Float64("cap_usd", s.botCap), zap.Float64("spent_usd", s.botSpent))
	}
}
