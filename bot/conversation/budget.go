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
	lim := b.Limits
	for _, cap := range []struct {
		usd  float64
		user int64
		what string
	}{{lim.DailyUSD, 0, "limits.daily_usd"}, {lim.PerUserDailyUSD, user, "limits.per_user_daily_usd"}} {
		if cap.usd <= 0 {
			continue
		}
		now := p.cfg.Now()
		spent, err := p.store.SpentToday(ctx, bot, cap.user, now)
		if err != nil {
			return false, err
		}
		if spent < cap.usd {
			continue
		}
		if cap.user == 0 && p.budgets.firstToday(bot, now) {
			log.Warn("daily spending cap reached: the bot answers no more messages today",
				zap.String("setting", cap.what), zap.Float64("cap_usd", cap.usd), zap.Float64("spent_usd", spent))
		}
		return true, nil
	}
	return false, nil
}
