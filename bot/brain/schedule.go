package brain

import (
	"time"

	"brainbot/toolspec"
)

// The bounds of reminders and check-ins, beside their defaults
// (toolspec.DefaultMaxPending, DefaultMaxAhead).
const (
	maxMaxAhead         = 10 * 365 * 24 * time.Hour
	minMaxAhead         = time.Minute
	defaultQuietFor     = 72 * time.Hour
	minQuietFor         = time.Second
	defaultCheckInsWeek = 2
	maxCheckInsWeek     = 14
)

// defaultQuietHours are a night's, in the user's time zone.
var defaultQuietHours = DayHours{From: 22 * time.Hour, To: 8 * time.Hour}

// applyScheduleDefaults fills in what reminders and check-ins leave out.
func applyScheduleDefaults(b *Brain, isSet func(string) bool) {
	if !isSet("reminders.max_pending") {
		b.Reminders.MaxPending = toolspec.DefaultMaxPending
	}
	if !isSet("reminders.max_ahead") {
		b.Reminders.MaxAhead = Duration(toolspec.DefaultMaxAhead)
	}
	if !isSet("check_ins.quiet_for") {
		b.CheckIns.QuietFor = Duration(defaultQuietFor)
	}
	if !isSet("check_ins.quiet_hours") {
		b.CheckIns.QuietHours = defaultQuietHours
	}
	if !isSet("check_ins.per_week") {
		b.CheckIns.PerWeek = defaultCheckInsWeek
	}
}

// validateSchedule checks the bounds of reminders and check-ins.
func (d *decoder) validateSchedule(b *Brain) {
	r, c := b.Reminders, b.CheckIns
	if n := r.MaxPending; n < 1 || n > toolspec.MaxMaxPending {
		d.reject("reminders.max_pending", "must be between 1 and %d (the reminders a user may have waiting; default %d), got %d",
			toolspec.MaxMaxPending, toolspec.DefaultMaxPending, n)
	}
	if a := r.MaxAhead.D(); a < minMaxAhead || a > maxMaxAhead {
		d.reject("reminders.max_ahead", "must be between 1m and 87600h (how far ahead a reminder may be; default 8760h, a year), got %v", a)
	}
	if q := c.QuietFor.D(); q < minQuietFor {
		d.reject("check_ins.quiet_for", "must be at least 1s (how long a user is quiet before the persona writes first; default 72h), got %v", q)
	}
	if n := c.PerWeek; n < 1 || n > maxCheckInsWeek {
		d.reject("check_ins.per_week", "must be between 1 and %d (the check-ins one user gets in any 7 days; default %d), got %d",
			maxCheckInsWeek, defaultCheckInsWeek, n)
	}
}
