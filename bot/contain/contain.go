// Package contain keeps one update from taking brainbot down (issue 23):
// net/http recovers a panic per request, and brainbot does per update,
// wherever one is handled. A panic there is reported here, the same way
// at every stage: logged at error with the update id and the stack that
// led to it, and counted in brainbot_panics_total.
package contain

import (
	"fmt"

	"go.uber.org/zap"

	"brainbot/metrics"
)

// The stages where a panic is contained (the metric's stage label).
const (
	// Intake: while an update is taken in (stored in its log).
	Intake = "intake"
	// Delivery: while the log's update is read and routed.
	Delivery = "delivery"
	// Answer: while a message is answered.
	Answer = "answer"
)

// Report logs a contained panic, v, of bot's update, and counts it. Call
// it in the deferred function that recovered: its stack still holds the
// panicking frames.
func Report(log *zap.Logger, m *metrics.Metrics, bot, stage string, updateID int64, v any) {
	log.Error("panic while handling an update; skipped", zap.String("stage", stage), zap.Int64("update_id", updateID),
		zap.String("panic", fmt.Sprint(v)), zap.Stack("stack"))
	m.Panics.WithLabelValues(bot, stage).Inc()
}
