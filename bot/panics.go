package bot

// No single update may take the process down: net/http recovers a panic
// per request, and brainbot does per update, wherever one is handled: the
// polling handler (intake), an update the cluster handed over (delivery)
// and the worker answering a message (answer). A panic there is logged at
// error with the update id and the stack, counted, the update confirmed
// (a replay would panic again) and its sender told it could not be read,
// as an undecodable update's is; everything else goes on.

import (
	"fmt"

	"go.uber.org/zap"

	"brainbot/bot/message"
	"brainbot/bot/telegram"
	"brainbot/metrics"
)

// The stages where a panic is contained (the metric's stage label).
const (
	stageIntake   = "intake"
	stageDelivery = "delivery"
	stageAnswer   = "answer"
)

// contain runs handle, which handles update env (d is its delivery in a
// cluster), and contains a panic in it: the update is then confirmed and
// its sender told, and contain reports it handled.
func (r *runner) contain(stage string, env message.Envelope, d Delivery, handle func() bool) (handled bool) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		reportPanic(r.log, r.m.cfg.Metrics, r.id, stage, env.UpdateID, v)
		r.confirm(env.UpdateID, d)
		if u := telegram.Decode(env); u.Kind == message.Written {
			r.tellUnreadable(u)
		}
		handled = true
	}()
	return handle()
}

// contain, deferred by serve and serveAside (after finish, so it runs
// first), contains a panic while answering the request's message: the
// sender is told it could not be read and the journal entry cleared.
func (r *request) contain() {
	v := recover()
	if v == nil {
		return
	}
	reportPanic(r.log, r.metrics, r.in.Key.Bot, stageAnswer, r.in.ID, v)
	r.keepJournal = false
	if r.brain == nil {
		r.drop("dropped")
		return
	}
	r.say("unreadable", r.brain.Messages.Unreadable)
}

// reportPanic logs a contained panic, with the stack that led to it, and
// counts it. It runs in the deferred call that recovered, whose stack
// still holds the panicking frames.
func reportPanic(log *zap.Logger, m *metrics.Metrics, bot, stage string, updateID int64, v any) {
	log.Error("panic while handling an update; skipped", zap.String("stage", stage), zap.Int64("update_id", updateID),
		zap.String("panic", fmt.Sprint(v)), zap.Stack("stack"))
	m.Panics.WithLabelValues(bot, stage).Inc()
}
