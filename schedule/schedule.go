// Package schedule finds the reminders and check-ins that came due and
// hands them to the conversations they belong to. It answers nothing
// itself: it appends each one to the log (message.Scheduled), where the
// intake and the pipeline answer it as they answer a message, in the
// conversation's order, by the instance answering that conversation.
// The log keeps one entry per (bot, ID), so every instance of a cluster
// runs a scheduler, and a reminder is written once however many of them
// find it due, and whichever of them dies.
//
// A reminder found due more than Late after its time (brainbot was down,
// or the brain had reminders off) is dropped with a log line: "call mom"
// a day late does more harm than good.
//
// A check-in goes to a user with a bot whose brain has check_ins on, who
// has been quiet (neither wrote nor was checked in with) for its
// quiet_for, outside the quiet hours of their day in their time zone,
// and only when the week's bound allows. The store lists only users who
// wrote privately first and neither declined nor blocked the bot.
package schedule

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/message"
	"brainbot/state"
)

// Defaults of Config.
const (
	// DefaultEvery is how often the store is asked what came due: a
	// reminder goes out at most this late (sooner when this process
	// kept it, see Wake).
	DefaultEvery = 5 * time.Second
	// DefaultLate is how late a reminder may still go out.
	DefaultLate = time.Hour
	// batch bounds the reminders one look at the store takes; quietBatch
	// the users quiet long enough: those in their quiet hours or at their
	// week's bound are listed again at each look, ahead of any quiet for
	// less long, so the list must reach past them (the backends read them
	// all anyway).
	batch      = 100
	quietBatch = 2000
	week       = 7 * 24 * time.Hour
)

// Store is what a scheduler reads and marks: the backend's reminders and
// contacts.
type Store interface {
	state.Reminders
	state.Contacts
}

// Appender is the log the scheduler writes to (state.Log's Append).
type Appender interface {
	Append(ctx context.Context, poller string, env message.Envelope) error
}

// Config is what a scheduler needs. Every field but the durations and Now
// is required.
type Config struct {
	Log   Appender
	Store Store
	// Brain is a bot's brain now (nil: it has none); Bots lists the bots
	// with one.
	Brain func(bot string) *brain.Brain
	Bots  func() []string
	// Every and Late default to DefaultEvery and DefaultLate; Now to
	// time.Now.
	Every, Late time.Duration
	Now         func() time.Time
	Logger      *zap.Logger
}

// Scheduler hands what came due to the log; see the package doc.
type Scheduler struct {
	cfg Config
	mu  sync.Mutex
	// soonest is the earliest time Wake was told of (zero: none).
	soonest time.Time
	woken   chan struct{}
}

// New makes a scheduler; Run runs it.
func New(cfg Config) *Scheduler {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Late <= 0 {
		cfg.Late = DefaultLate
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{cfg: cfg, woken: make(chan struct{}, 1)}
}

// Wake tells the scheduler something comes due at at (a reminder kept
// here): it looks then, not at its next round.
func (s *Scheduler) Wake(at time.Time) {
	s.mu.Lock()
	if s.soonest.IsZero() || at.Before(s.soonest) {
		s.soonest = at
	}
	s.mu.Unlock()
	select {
	case s.woken <- struct{}{}:
	default:
	}
}

// Run looks at once, then every Every and when woken, until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	for {
		s.Tick(ctx)
		timer := time.NewTimer(s.untilNext())
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-s.woken:
			timer.Stop()
		}
	}
}

// untilNext is how long to wait for the next look: Every, or less when
// something comes due sooner.
func (s *Scheduler) untilNext() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := s.cfg.Every
	if !s.soonest.IsZero() {
		wait = min(wait, s.soonest.Sub(s.cfg.Now()))
		if wait <= 0 {
			s.soonest = time.Time{}
		}
	}
	return max(wait, 0)
}

// Tick hands on once what is due now.
func (s *Scheduler) Tick(ctx context.Context) {
	now := s.cfg.Now()
	s.reminders(ctx, now)
	for _, bot := range s.cfg.Bots() {
		if b := s.cfg.Brain(bot); b != nil && b.CheckIns.Enabled {
			s.checkIns(ctx, bot, b, now)
		}
	}
}

// reminders appends the reminders due at now, and drops those too late.
func (s *Scheduler) reminders(ctx context.Context, now time.Time) {
	due, err := s.cfg.Store.DueReminders(ctx, now, batch)
	if err != nil {
		s.cfg.Logger.Warn("could not list the reminders due", zap.Error(err))
		return
	}
	for _, r := range due {
		log := s.cfg.Logger.With(zap.String("bot", r.Key.Bot), zap.Int64("user", r.User), zap.String("reminder", r.ID))
		late := now.Sub(r.Due)
		b := s.cfg.Brain(r.Key.Bot)
		switch {
		case late > s.cfg.Late:
			log.Info("reminder dropped: found due too late to be of use", zap.Time("due", r.Due),
				zap.Duration("late_ms", late), zap.Duration("bound_ms", s.cfg.Late))
		case b == nil || !b.Reminders.Enabled:
			continue // kept while it may still go out
		default:
			env := envelope(r.Key, now, message.Scheduled{Kind: message.Reminder, ID: "reminder/" + r.ID, User: r.User, Text: r.Text, Due: r.Due})
			if err := s.cfg.Log.Append(ctx, "", env); err != nil {
				log.Warn("could not hand a reminder due to its conversation; it is tried again", zap.Error(err))
				continue
			}
			log.Info("reminder due, handed to its conversation", zap.Time("due", r.Due))
		}
		if err := s.cfg.Store.DoneReminder(ctx, r.Key.Bot, r.ID); err != nil {
			log.Warn("could not mark a reminder done", zap.Error(err))
		}
	}
}

// checkIns appends a check-in for each of bot's users quiet long enough,
// where their hour and the week's bound allow.
func (s *Scheduler) checkIns(ctx context.Context, bot string, b *brain.Brain, now time.Time) {
	c := b.CheckIns
	quiet, err := s.cfg.Store.QuietContacts(ctx, bot, now.Add(-c.QuietFor.D()), quietBatch)
	if err != nil {
		s.cfg.Logger.Warn("could not list the users to check in with", zap.String("bot", bot), zap.Error(err))
		return
	}
	for _, u := range quiet {
		if !Due(b, u, now) {
			continue
		}
		log := s.cfg.Logger.With(zap.String("bot", bot), zap.Int64("user", u.User))
		key := message.Key{Bot: bot, Chat: u.User}
		env := envelope(key, now, message.Scheduled{Kind: message.CheckIn, ID: checkInID(u), User: u.User, Due: now})
		if err := s.cfg.Log.Append(ctx, "", env); err != nil {
			log.Warn("could not hand a check-in to its conversation", zap.Error(err))
			continue
		}
		if err := s.cfg.Store.CheckedIn(ctx, bot, u.User, now); err != nil {
			log.Warn("could not record a check-in", zap.Error(err))
		}
		log.Info("check-in handed to its conversation", zap.Time("quiet_since", quietSince(u)))
	}
}

// Due reports whether a check-in may go to u at now, by b's check_ins:
// quiet long enough, not declined nor blocked, outside the quiet hours of
// their day, within the week's bound.
func Due(b *brain.Brain, u state.Contact, now time.Time) bool {
	c := b.CheckIns
	if !c.Enabled || u.Declined || u.Blocked || u.Wrote.IsZero() || now.Sub(quietSince(u)) < c.QuietFor.D() {
		return false
	}
	if c.QuietHours.Holds(now.In(Location(u.Zone, b))) {
		return false
	}
	recent := 0
	for _, at := range u.CheckIns {
		if now.Sub(at) < week {
			recent++
		}
	}
	return recent < c.PerWeek
}

// Location is a user's time zone: theirs, else their bot's.
func Location(zone string, b *brain.Brain) *time.Location {
	if zone != "" {
		if loc, err := time.LoadLocation(zone); err == nil {
			return loc
		}
	}
	return b.Location()
}

// quietSince is when u last heard of the bot or wrote to it.
func quietSince(u state.Contact) time.Time {
	since := u.Wrote
	if n := len(u.CheckIns); n > 0 && u.CheckIns[n-1].After(since) {
		since = u.CheckIns[n-1]
	}
	return since
}

// checkInID names the check-in that ends u's quiet: every instance that
// finds it quiet names it alike, so the log keeps one.
func checkInID(u state.Contact) string {
	return fmt.Sprintf("check-in/%d/%d", u.User, quietSince(u).UnixMilli())
}

// envelope is s, due in key's conversation, as the log keeps it.
func envelope(key message.Key, now time.Time, s message.Scheduled) message.Envelope {
	return message.Envelope{Bot: key.Bot, Key: key, Received: now, Scheduled: &s}
}
