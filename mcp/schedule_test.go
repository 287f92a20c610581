package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"brainbot/ticket"
	"brainbot/toolspec"
)

// diary is a Schedule in memory.
type diary struct {
	mu        sync.Mutex
	reminders map[string][]PendingReminder
	zones     map[string]string
	next      int
}

func (d *diary) Remind(_ context.Context, bot string, user int64, text string, due time.Time, limit int, _ time.Time) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := key(bot, user)
	if len(d.reminders[k]) >= limit {
		return "", ErrRemindersFull
	}
	d.next++
	id := fmt.Sprint(d.next)
	d.reminders[k] = append(d.reminders[k], PendingReminder{ID: id, Text: text, Due: due})
	return id, nil
}

func (d *diary) Pending(_ context.Context, bot string, user int64) ([]PendingReminder, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.reminders[key(bot, user)]), nil
}

func (d *diary) Cancel(_ context.Context, bot string, user int64, id string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := key(bot, user)
	before := len(d.reminders[k])
	d.reminders[k] = slices.DeleteFunc(d.reminders[k], func(r PendingReminder) bool { return r.ID == id })
	return len(d.reminders[k]) < before, nil
}

func (d *diary) TimeZone(_ context.Context, bot string, user int64) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.zones[key(bot, user)], nil
}

func (d *diary) SetTimeZone(_ context.Context, bot string, user int64, zone string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.zones[key(bot, user)] = zone
	return nil
}

// The schedule tools keep the reminders of the user and bot the request
// gave, at a time read in the user's zone (the brain's until they set
// theirs); never in the past nor past the brain's bounds, telling the
// model why; and nothing without a scope.
func TestHTTPSchedule(t *testing.T) {
	f := newHTTPFixture(t)
	p := f.process(t)
	c, err := f.connect(t, toolspec.MemoryServer, p.Token())
	if err != nil {
		t.Fatal(err)
	}
	d := &diary{reminders: map[string][]PendingReminder{}, zones: map[string]string{}}
	f.srv.UseSchedule(d)
	p.AllowMemory(ticket.Memory{Bot: "friend", User: 7, Schedule: true, MaxPending: 2, MaxAhead: 48 * time.Hour, Zone: "Asia/Tokyo"})
	remind := func(at string) map[string]any { return map[string]any{"at": at, "text": " call mom ", "user": 8} }

	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	local := fixedNow.In(tokyo).Add(time.Hour)
	got := resultText(t, call(t, c, toolspec.RemindToolName, remind(local.Format(toolspec.LocalTimeLayout))))
	if want := "(Asia/Tokyo)"; !strings.HasPrefix(got, "Reminder 1 kept for ") || !strings.Contains(got, want) {
		t.Errorf("remind in the brain's zone: %q", got)
	}
	if rs := d.reminders[key("friend", 7)]; len(rs) != 1 || rs[0].Text != "call mom" || !rs[0].Due.Equal(fixedNow.Add(time.Hour).Truncate(time.Minute)) {
		t.Errorf("kept %+v, want call mom at %v", rs, fixedNow.Add(time.Hour).Truncate(time.Minute))
	}
	for at, want := range map[string]string{
		"tomorrow at nine": toolspec.RemindBadTime("tomorrow at nine"),
		fixedNow.Add(-time.Minute).Format(time.RFC3339):   toolspec.RemindPast(localTime(fixedNow, tokyo)),
		fixedNow.Add(49 * time.Hour).Format(time.RFC3339): toolspec.RemindTooFar("2 days ahead"),
	} {
		if msg := failure(t, call(t, c, toolspec.RemindToolName, remind(at))); msg != want {
			t.Errorf("remind at %q: %q, want %q", at, msg, want)
		}
	}
	resultText(t, call(t, c, toolspec.RemindToolName, remind(fixedNow.Add(2*time.Hour).Format(time.RFC3339))))
	if msg := failure(t, call(t, c, toolspec.RemindToolName, remind(fixedNow.Add(3*time.Hour).Format(time.RFC3339)))); msg != toolspec.RemindersFull(2) {
		t.Errorf("a third reminder of at most 2: %q", msg)
	}
	if list := resultText(t, call(t, c, toolspec.ListRemindersToolName, nil)); !strings.Contains(list, `1 at `) || !strings.Contains(list, `"call mom"`) {
		t.Errorf("list_reminders: %q", list)
	}
	if msg := failure(t, call(t, c, toolspec.CancelReminderToolName, map[string]any{"id": "9"})); msg != toolspec.NoReminder {
		t.Errorf("cancel of no reminder: %q", msg)
	}
	if got := resultText(t, call(t, c, toolspec.CancelReminderToolName, map[string]any{"id": "1"})); got != toolspec.ReminderCancelled("1") {
		t.Errorf("cancel_reminder: %q", got)
	}

	// The user's own zone, once set, reads the next local time.
	if msg := failure(t, call(t, c, toolspec.SetTimeZoneToolName, map[string]any{"zone": "Mars/Olympus"})); msg != toolspec.BadTimeZone("Mars/Olympus") {
		t.Errorf("an unknown zone: %q", msg)
	}
	resultText(t, call(t, c, toolspec.SetTimeZoneToolName, map[string]any{"zone": "Europe/Berlin"}))
	if z := d.zones[key("friend", 7)]; z != "Europe/Berlin" {
		t.Errorf("zone kept = %q", z)
	}
	resultText(t, call(t, c, toolspec.CancelReminderToolName, map[string]any{"id": "2"}))
	berlin, _ := time.LoadLocation("Europe/Berlin")
	resultText(t, call(t, c, toolspec.RemindToolName, remind(fixedNow.In(berlin).Add(time.Hour).Format(toolspec.LocalTimeLayout))))
	if rs := d.reminders[key("friend", 7)]; len(rs) != 1 || !rs[0].Due.Equal(fixedNow.Add(time.Hour).Truncate(time.Minute)) {
		t.Errorf("kept %+v in Berlin's time", rs)
	}

	// A request without a schedule (a group's, a brain without
	// reminders) keeps none.
	p.AllowMemory(ticket.Memory{Bot: "friend", User: 7, MaxNotes: 3, MaxNoteChars: 50})
	if msg := failure(t, call(t, c, toolspec.RemindToolName, remind(fixedNow.Add(time.Hour).Format(time.RFC3339)))); msg != toolspec.ScheduleNotHere {
		t.Errorf("a request without a schedule: %q", msg)
	}
	// And one with a schedule but no notes refuses notes.
	p.AllowMemory(ticket.Memory{Bot: "friend", User: 7, Schedule: true, MaxPending: 2, MaxAhead: time.Hour})
	f.srv.UseNotes(&pad{notes: map[string][]string{}})
	if msg := failure(t, call(t, c, toolspec.RememberToolName, map[string]any{"note": "x"})); msg != toolspec.MemoryNotHere {
		t.Errorf("remember on a brain without memory: %q", msg)
	}
}
