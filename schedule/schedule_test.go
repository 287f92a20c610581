package schedule

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/bot/brain"
	"brainbot/message"
	"brainbot/state"
)

// store is a Store in memory, as the contract says one behaves.
type store struct {
	mu        sync.Mutex
	reminders []state.Reminder
	contacts  map[int64]*state.Contact
	next      int
}

func newStore() *store { return &store{contacts: map[int64]*state.Contact{}} }

func (s *store) AddReminder(_ context.Context, r state.Reminder, limit int) (state.Reminder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	r.ID = strconv.Itoa(s.next)
	s.reminders = append(s.reminders, r)
	return r, nil
}

func (s *store) Reminders(context.Context, string, int64) ([]state.Reminder, error) { return nil, nil }

func (s *store) CancelReminder(context.Context, string, int64, string) (bool, error) {
	return false, nil
}

func (s *store) DueReminders(_ context.Context, now time.Time, limit int) ([]state.Reminder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []state.Reminder
	for _, r := range s.reminders {
		if !r.Due.After(now) && len(due) < limit {
			due = append(due, r)
		}
	}
	return due, nil
}

func (s *store) DoneReminder(_ context.Context, bot, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reminders = slices.DeleteFunc(s.reminders, func(r state.Reminder) bool { return r.Key.Bot == bot && r.ID == id })
	return nil
}

func (s *store) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reminders)
}

func (s *store) Contact(_ context.Context, _ string, user int64) (state.Contact, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.contacts[user]
	if !ok {
		return state.Contact{}, false, nil
	}
	return *c, true, nil
}

func (s *store) Wrote(_ context.Context, bot string, user int64, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.contacts[user]
	if !ok {
		c = &state.Contact{Bot: bot, User: user}
		s.contacts[user] = c
	}
	c.Wrote, c.Blocked = now, false
	return nil
}

func (s *store) SetTimeZone(_ context.Context, _ string, user int64, zone string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contacts[user].Zone = zone
	return nil
}

func (s *store) DeclineCheckIns(_ context.Context, _ string, user int64, declined bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contacts[user].Declined = declined
	return nil
}

func (s *store) CheckedIn(_ context.Context, _ string, user int64, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.contacts[user]
	c.CheckIns = append(slices.DeleteFunc(c.CheckIns, func(t time.Time) bool { return at.Sub(t) >= week }), at)
	return nil
}

func (s *store) EndSchedule(_ context.Context, _ string, user int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contacts[user].Blocked = true
	return nil
}

func (s *store) QuietContacts(_ context.Context, _ string, since time.Time, limit int) ([]state.Contact, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var quiet []state.Contact
	for _, c := range s.contacts {
		if !c.Declined && !c.Blocked && quietSince(*c).Before(since) && len(quiet) < limit {
			quiet = append(quiet, *c)
		}
	}
	return quiet, nil
}

// journal is a log that keeps one entry per (bot, ID), as both backends'.
type journal struct {
	mu      sync.Mutex
	entries []message.Envelope
	fail    error
}

func (j *journal) Append(_ context.Context, _ string, env message.Envelope) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail != nil {
		return j.fail
	}
	if !slices.ContainsFunc(j.entries, func(e message.Envelope) bool {
		return e.Bot == env.Bot && e.Scheduled.ID == env.Scheduled.ID
	}) {
		j.entries = append(j.entries, env)
	}
	return nil
}

func (j *journal) got() []message.Envelope {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// friend is a brain with reminders and check-ins, in Berlin.
func friend(t *testing.T, checkIns string) *brain.Brain {
	t.Helper()
	b, err := brain.ParseBytes("friend.yaml", []byte("name: Friend\nsystem_prompt: x\ntelegram:\n  token_env: T\ntimezone: Europe/Berlin\n"+
		"reminders:\n  enabled: true\ncheck_ins:\n"+checkIns))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newScheduler(s *store, j *journal, b *brain.Brain) (*Scheduler, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	return New(Config{Log: j, Store: s, Brain: func(bot string) *brain.Brain {
		if bot == b.ID {
			return b
		}
		return nil
	}, Bots: func() []string { return []string{b.ID} }, Logger: zap.New(core)}), logs
}

// A reminder goes to its conversation's log at its time, once, and is
// marked done; one kept in this process wakes the scheduler before its
// round.
func TestReminderAtItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, j := newStore(), &journal{}
		b := friend(t, "  enabled: false\n")
		sch, _ := newScheduler(s, j, b)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go sch.Run(ctx)
		start := time.Now()
		key := message.Key{Bot: "friend", Chat: 7}
		due := start.Add(1500 * time.Millisecond)
		s.AddReminder(ctx, state.Reminder{Key: key, User: 7, Text: "call mom", Due: due}, 0)
		sch.Wake(due)
		synctest.Wait()
		if got := j.got(); len(got) != 0 {
			t.Fatalf("before its time: %+v", got)
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		got := j.got()
		if len(got) != 1 {
			t.Fatalf("at its time: %d entries, want 1", len(got))
		}
		want := message.Scheduled{Kind: message.Reminder, ID: "reminder/1", User: 7, Text: "call mom", Due: due}
		if e := got[0]; e.Bot != "friend" || e.Key != key || e.Raw != nil || *e.Scheduled != want || !e.Received.Equal(due) {
			t.Errorf("entry %+v %+v, want %+v at %v", e, *e.Scheduled, want, due)
		}
		if s.pending() != 0 {
			t.Error("the reminder is not marked done")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(j.got()); n != 1 {
			t.Errorf("a minute later: %d entries", n)
		}
	})
}

// A reminder found due more than an hour late (brainbot was down) is
// dropped with a log line; one less late goes out. One the log could not
// take is tried again at the next round.
func TestReminderLateOrRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, j := newStore(), &journal{fail: errors.New("nats away")}
		b := friend(t, "  enabled: false\n")
		sch, logs := newScheduler(s, j, b)
		now := time.Now()
		key := message.Key{Bot: "friend", Chat: 7}
		s.AddReminder(t.Context(), state.Reminder{Key: key, User: 7, Text: "stale", Due: now.Add(-61 * time.Minute)}, 0)
		s.AddReminder(t.Context(), state.Reminder{Key: key, User: 7, Text: "timely", Due: now.Add(-59 * time.Minute)}, 0)
		sch.Tick(t.Context())
		if len(j.got()) != 0 || s.pending() != 1 {
			t.Fatalf("log failing: entries %+v, %d pending; want none, the timely one", j.got(), s.pending())
		}
		if l := logs.FilterMessage("reminder dropped: found due too late to be of use").All(); len(l) != 1 || l[0].ContextMap()["reminder"] != "1" {
			t.Errorf("drop log lines: %+v", l)
		}
		j.mu.Lock()
		j.fail = nil
		j.mu.Unlock()
		sch.Tick(t.Context())
		if got := j.got(); len(got) != 1 || got[0].Scheduled.Text != "timely" || s.pending() != 0 {
			t.Errorf("retried: %+v, %d pending", got, s.pending())
		}
	})
}

// A reminder of a bot whose brain has reminders off waits, while it may
// still go out.
func TestReminderOfABrainWithoutReminders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, j := newStore(), &journal{}
		b := friend(t, "  enabled: false\n")
		b.Reminders.Enabled = false
		sch, _ := newScheduler(s, j, b)
		s.AddReminder(t.Context(), state.Reminder{Key: message.Key{Bot: "friend", Chat: 7}, User: 7, Due: time.Now()}, 0)
		sch.Tick(t.Context())
		if len(j.got()) != 0 || s.pending() != 1 {
			t.Errorf("entries %+v, %d pending", j.got(), s.pending())
		}
	})
}

// A check-in goes to a user quiet for quiet_for, not in their quiet
// hours (in their zone), at most per_week in 7 days, never after their
// no; two instances finding it due append it once.
func TestCheckIns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble starts at 2000-01-01 00:00 UTC: 01:00 in Berlin.
		s, j := newStore(), &journal{}
		b := friend(t, "  enabled: true\n  quiet_for: 2h\n  quiet_hours: \"00:00-06:00\"\n  per_week: 2\n")
		one, _ := newScheduler(s, j, b)
		two, _ := newScheduler(s, j, b)
		ctx := t.Context()
		s.Wrote(ctx, "friend", 7, time.Now())
		tick := func() {
			one.Tick(ctx)
			two.Tick(ctx)
		}
		tick()
		if n := len(j.got()); n != 0 {
			t.Fatalf("just after the user wrote: %d check-ins", n)
		}
		time.Sleep(3 * time.Hour) // 04:00 in Berlin: quiet hours
		tick()
		if n := len(j.got()); n != 0 {
			t.Fatalf("in the user's quiet hours: %d check-ins", n)
		}
		// In Tokyo it is 13:00.
		s.SetTimeZone(ctx, "friend", 7, "Asia/Tokyo")
		tick()
		got := j.got()
		if len(got) != 1 {
			t.Fatalf("out of the user's quiet hours in their zone: %d check-ins, want 1", len(got))
		}
		if e := got[0]; e.Key != (message.Key{Bot: "friend", Chat: 7}) || e.Scheduled.Kind != message.CheckIn || e.Scheduled.User != 7 {
			t.Errorf("check-in %+v %+v", e, e.Scheduled)
		}
		time.Sleep(2*time.Hour + time.Second)
		tick()
		if n := len(j.got()); n != 2 {
			t.Fatalf("quiet again for quiet_for: %d check-ins, want 2", n)
		}
		time.Sleep(3 * time.Hour) // quiet long enough again
		one.Tick(ctx)
		if n := len(j.got()); n != 2 {
			t.Fatalf("past the week's bound of 2: %d check-ins", n)
		}
		time.Sleep(week - 5*time.Hour) // the first is over a week old
		one.Tick(ctx)
		if n := len(j.got()); n != 3 {
			t.Fatalf("a week after the first: %d check-ins, want 3", n)
		}

		s.DeclineCheckIns(ctx, "friend", 7, true)
		time.Sleep(week)
		one.Tick(ctx)
		if n := len(j.got()); n != 3 {
			t.Fatalf("after the user's no: %d check-ins", n)
		}
	})
}

// Due decides each rule alone.
func TestDue(t *testing.T) {
	b := &brain.Brain{CheckIns: brain.CheckIns{Enabled: true, QuietFor: brain.Duration(time.Hour), PerWeek: 1,
		QuietHours: brain.DayHours{From: 22 * time.Hour, To: 8 * time.Hour}}}
	noon := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	quiet := state.Contact{User: 7, Wrote: noon.Add(-2 * time.Hour)}
	for name, c := range map[string]struct {
		u    state.Contact
		now  time.Time
		want bool
	}{
		"quiet":                      {quiet, noon, true},
		"not quiet long enough":      {state.Contact{User: 7, Wrote: noon.Add(-time.Minute)}, noon, false},
		"never wrote":                {state.Contact{User: 7}, noon, false},
		"declined":                   {state.Contact{User: 7, Wrote: quiet.Wrote, Declined: true}, noon, false},
		"blocked":                    {state.Contact{User: 7, Wrote: quiet.Wrote, Blocked: true}, noon, false},
		"at night":                   {quiet, noon.Add(11 * time.Hour), false},
		"past midnight":              {quiet, noon.Add(19 * time.Hour), false},
		"in the morning":             {quiet, noon.Add(20 * time.Hour), true},
		"in their zone's night":      {state.Contact{User: 7, Wrote: quiet.Wrote, Zone: "Asia/Tokyo"}, noon.Add(2 * time.Hour), false},
		"checked in this week":       {state.Contact{User: 7, Wrote: quiet.Wrote.Add(-week), CheckIns: []time.Time{noon.Add(-6 * 24 * time.Hour)}}, noon, false},
		"checked in over a week ago": {state.Contact{User: 7, Wrote: quiet.Wrote.Add(-week), CheckIns: []time.Time{noon.Add(-week)}}, noon, true},
	} {
		if got := Due(b, c.u, c.now); got != c.want {
			t.Errorf("%s: Due = %v, want %v", name, got, c.want)
		}
	}
}
