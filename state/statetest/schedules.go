package statetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
)

// The reminders users ask for (Reminders), what check-ins go by
// (Contacts), and the scheduled messages in the log.

// remind is a reminder of Ann's (user 7) in k, due in after base().
func remind(k message.Key, text string, in time.Duration) state.Reminder {
	now := base()
	return state.Reminder{Key: k, User: 7, Text: text, Due: now.Add(in), Created: now}
}

func addReminder(t *testing.T, s *subject, r state.Reminder, limit int) state.Reminder {
	t.Helper()
	kept, err := s.AddReminder(ctx(t), r, limit)
	must(t, err)
	if kept.ID == "" {
		t.Fatalf("AddReminder(%q) gave no id", r.Text)
	}
	r.ID = kept.ID
	if !reflect.DeepEqual(kept, r) {
		t.Errorf("AddReminder = %+v, want %+v", kept, r)
	}
	return kept
}

// wantReminders checks user's reminders with bot, in order, whole.
func wantReminders(t *testing.T, s *subject, bot string, user int64, want ...state.Reminder) {
	t.Helper()
	got, err := s.Reminders(ctx(t), bot, user)
	must(t, err)
	wantSameReminders(t, fmt.Sprintf("Reminders(%s, %d)", bot, user), got, want)
}

func wantSameReminders(t *testing.T, what string, got, want []state.Reminder) {
	t.Helper()
	if len(got) != len(want) || len(got) > 0 && !reflect.DeepEqual(got, want) {
		t.Errorf("%s =\n%+v\nwant\n%+v", what, got, want)
	}
}

var reminderTests = []behaviour{
	{"KeptSoonestFirstWithUniqueIDs", func(t *testing.T, s *subject) {
		later := addReminder(t, s, remind(annAlice, "call mom", 2*time.Hour), 0)
		sooner := addReminder(t, s, remind(annAlice, "water the plants", time.Hour), 0)
		inGroup := addReminder(t, s, remind(group, "bring the slides", 90*time.Minute), 0)
		same := addReminder(t, s, remind(annAlice, "also at two", 2*time.Hour), 0)
		bos := remind(boAlice, "Bo's", time.Hour)
		bos.User = 8
		bos = addReminder(t, s, bos, 0)
		bobs := addReminder(t, s, remind(annBob, "with bob", time.Hour), 0)
		ids := []string{later.ID, sooner.ID, inGroup.ID, same.ID, bos.ID, bobs.ID}
		slices.Sort(ids)
		if len(slices.Compact(ids)) != 6 {
			t.Errorf("ids %v: want six, each its own", ids)
		}
		s.restarted()
		// Two due at once: the first kept first.
		wantReminders(t, s, "alice", 7, sooner, inGroup, later, same)
		wantReminders(t, s, "alice", 8, bos)
		wantReminders(t, s, "bob", 7, bobs)
		wantReminders(t, s, "carol", 7)
	}},
	{"BoundedByTheLimit", func(t *testing.T, s *subject) {
		one := addReminder(t, s, remind(annAlice, "one", time.Hour), 2)
		two := addReminder(t, s, remind(group, "two, in a group", time.Hour), 2)
		if _, err := s.AddReminder(ctx(t), remind(annAlice, "three", time.Hour), 2); !errors.Is(err, state.ErrRemindersFull) {
			t.Errorf("a third reminder of at most 2: %v, want ErrRemindersFull", err)
		}
		bobs := addReminder(t, s, remind(annBob, "another bot's", time.Hour), 2)
		unbounded := addReminder(t, s, remind(annAlice, "unbounded", 2*time.Hour), 0)
		wantReminders(t, s, "alice", 7, one, two, unbounded)
		wantReminders(t, s, "bob", 7, bobs)
	}},
	{"AddsAtOnceNeverPassTheLimit", func(t *testing.T, s *subject) {
		addsAtOnce(t, state.ErrRemindersFull, func(limit int) error {
			_, err := s.AddReminder(ctx(t), remind(annAlice, "at once", time.Hour), limit)
			return err
		}, func() int {
			rs, err := s.Reminders(ctx(t), "alice", 7)
			must(t, err)
			return len(rs)
		})
	}},
	{"CancelledOnlyByTheirUser", func(t *testing.T, s *subject) {
		mine := addReminder(t, s, remind(annAlice, "mine", time.Hour), 0)
		kept := addReminder(t, s, remind(annAlice, "kept", 2*time.Hour), 0)
		for _, c := range []struct {
			bot  string
			user int64
			id   string
		}{{"alice", 8, mine.ID}, {"bob", 7, mine.ID}, {"alice", 7, "no such id"}, {"alice", 7, ""}} {
			if gone, err := s.CancelReminder(ctx(t), c.bot, c.user, c.id); err != nil || gone {
				t.Errorf("CancelReminder(%s, %d, %q) = %v, %v; want false: not theirs", c.bot, c.user, c.id, gone, err)
			}
		}
		if gone, err := s.CancelReminder(ctx(t), "alice", 7, mine.ID); err != nil || !gone {
			t.Errorf("CancelReminder of their own = %v, %v", gone, err)
		}
		if gone, err := s.CancelReminder(ctx(t), "alice", 7, mine.ID); err != nil || gone {
			t.Errorf("CancelReminder again = %v, %v; want false", gone, err)
		}
		wantReminders(t, s, "alice", 7, kept)
	}},
	{"DueListedSoonestFirstWithinTheLimit", func(t *testing.T, s *subject) {
		now := base()
		oldest := addReminder(t, s, remind(annAlice, "oldest", -time.Hour), 0)
		bos := remind(boAlice, "Bo's", -30*time.Minute)
		bos.User = 8
		bos = addReminder(t, s, bos, 0)
		bobs := addReminder(t, s, remind(annBob, "with bob", -time.Minute), 0)
		atNow, notYet := remind(group, "right now", 0), remind(annAlice, "not yet", 0)
		atNow.Due, notYet.Due = now, now.Add(time.Millisecond)
		atNow = addReminder(t, s, atNow, 0)
		addReminder(t, s, notYet, 0)
		wantDue(t, s, now, 0, oldest, bos, bobs, atNow)
		wantDue(t, s, now, 2, oldest, bos)
		wantDue(t, s, now.Add(-2*time.Hour), 0)
	}},
	{"DoneOnceAndAgainIsNoError", func(t *testing.T, s *subject) {
		now := base()
		due := addReminder(t, s, remind(annAlice, "due", -time.Minute), 0)
		must(t, s.DoneReminder(ctx(t), "alice", due.ID))
		must(t, s.DoneReminder(ctx(t), "alice", due.ID))
		must(t, s.DoneReminder(ctx(t), "alice", "no such id"))
		wantDue(t, s, now, 0)
		wantReminders(t, s, "alice", 7)
		// Done names the bot's reminder: another bot's is another.
		bobs := addReminder(t, s, remind(annBob, "with bob", -time.Minute), 0)
		must(t, s.DoneReminder(ctx(t), "alice", bobs.ID))
		wantDue(t, s, now, 0, bobs)
		// An id is never given again.
		if next := addReminder(t, s, remind(annAlice, "next", time.Hour), 0); next.ID == due.ID || next.ID == bobs.ID {
			t.Errorf("a new reminder took the id %q of another", next.ID)
		}
	}},
}

func wantDue(t *testing.T, s *subject, now time.Time, limit int, want ...state.Reminder) {
	t.Helper()
	got, err := s.DueReminders(ctx(t), now, limit)
	must(t, err)
	wantSameReminders(t, fmt.Sprintf("DueReminders(%v, %d)", now, limit), got, want)
}

// wantContact checks user's contact with bot, whole.
func wantContact(t *testing.T, s *subject, bot string, user int64, ok bool, want state.Contact) {
	t.Helper()
	got, found, err := s.Contact(ctx(t), bot, user)
	must(t, err)
	want.Bot, want.User = bot, user
	if found != ok || !sameContact(got, want) {
		t.Errorf("Contact(%s, %d) = %+v, %v\nwant %+v, %v", bot, user, got, found, want, ok)
	}
}

func sameContact(a, b state.Contact) bool {
	return a.Bot == b.Bot && a.User == b.User && a.Zone == b.Zone && a.Wrote.Equal(b.Wrote) && a.Declined == b.Declined &&
		a.Blocked == b.Blocked && slices.EqualFunc(a.CheckIns, b.CheckIns, time.Time.Equal)
}

// wantQuiet checks the users QuietContacts lists, in order.
func wantQuiet(t *testing.T, s *subject, bot string, since time.Time, limit int, want ...int64) {
	t.Helper()
	got, err := s.QuietContacts(ctx(t), bot, since, limit)
	must(t, err)
	var users []int64
	for _, c := range got {
		users = append(users, c.User)
		if c.Bot != bot {
			t.Errorf("QuietContacts(%s) listed %+v", bot, c)
		}
	}
	if !slices.Equal(users, want) {
		t.Errorf("QuietContacts(%s, %v, %d) = %v, want %v", bot, since, limit, users, want)
	}
}

var contactTests = []behaviour{
	{"KeptFromTheFirstMessage", func(t *testing.T, s *subject) {
		now := base()
		wantContact(t, s, "alice", 7, false, state.Contact{})
		// Set in a group, before any private message: kept, not a
		// contact a check-in writes to.
		must(t, s.SetTimeZone(ctx(t), "alice", 7, "Europe/Lisbon"))
		must(t, s.DeclineCheckIns(ctx(t), "alice", 7, true))
		wantContact(t, s, "alice", 7, false, state.Contact{Zone: "Europe/Lisbon", Declined: true})
		must(t, s.Wrote(ctx(t), "alice", 7, now))
		must(t, s.Wrote(ctx(t), "alice", 7, now.Add(-time.Hour))) // never back
		must(t, s.DeclineCheckIns(ctx(t), "alice", 7, false))
		s.restarted()
		wantContact(t, s, "alice", 7, true, state.Contact{Zone: "Europe/Lisbon", Wrote: now})
		must(t, s.SetTimeZone(ctx(t), "alice", 7, ""))
		wantContact(t, s, "alice", 7, true, state.Contact{Wrote: now})
		wantContact(t, s, "bob", 7, false, state.Contact{})
		wantContact(t, s, "alice", 8, false, state.Contact{})
	}},
	{"CheckInsOfTheLastWeek", func(t *testing.T, s *subject) {
		t0 := base().Add(-30 * 24 * time.Hour)
		must(t, s.Wrote(ctx(t), "alice", 7, t0))
		for _, d := range []int{0, 2, 8} {
			must(t, s.CheckedIn(ctx(t), "alice", 7, t0.Add(time.Duration(d)*24*time.Hour)))
		}
		day := func(d int) time.Time { return t0.Add(time.Duration(d) * 24 * time.Hour) }
		wantContact(t, s, "alice", 7, true, state.Contact{Wrote: t0, CheckIns: []time.Time{day(2), day(8)}})
		must(t, s.CheckedIn(ctx(t), "alice", 7, day(9)))
		wantContact(t, s, "alice", 7, true, state.Contact{Wrote: t0, CheckIns: []time.Time{day(8), day(9)}})
		must(t, s.CheckedIn(ctx(t), "alice", 7, day(20)))
		wantContact(t, s, "alice", 7, true, state.Contact{Wrote: t0, CheckIns: []time.Time{day(20)}})
	}},
	{"EndScheduleUntilTheyWriteAgain", func(t *testing.T, s *subject) {
		now := base()
		must(t, s.Wrote(ctx(t), "alice", 7, now.Add(-48*time.Hour)))
		must(t, s.SetTimeZone(ctx(t), "alice", 7, "Asia/Tokyo"))
		must(t, s.Wrote(ctx(t), "bob", 7, now.Add(-48*time.Hour)))
		addReminder(t, s, remind(annAlice, "private", time.Hour), 0)
		addReminder(t, s, remind(group, "in the group", time.Hour), 0)
		bobs := addReminder(t, s, remind(annBob, "with bob", time.Hour), 0)
		must(t, s.EndSchedule(ctx(t), "alice", 7))
		s.restarted()
		wantReminders(t, s, "alice", 7)
		wantReminders(t, s, "bob", 7, bobs)
		wantContact(t, s, "alice", 7, true, state.Contact{Zone: "Asia/Tokyo", Wrote: now.Add(-48 * time.Hour), Blocked: true})
		wantQuiet(t, s, "alice", now, 0)
		wantQuiet(t, s, "bob", now, 0, 7)
		must(t, s.Wrote(ctx(t), "alice", 7, now.Add(-24*time.Hour)))
		wantContact(t, s, "alice", 7, true, state.Contact{Zone: "Asia/Tokyo", Wrote: now.Add(-24 * time.Hour)})
		wantQuiet(t, s, "alice", now, 0, 7)
	}},
	{"QuietListedLongestQuietFirst", func(t *testing.T, s *subject) {
		now := base()
		ago := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
		for user, wrote := range map[int64]int{1: 50, 2: 70, 3: 60, 4: 80, 5: 90, 6: 100, 7: 5, 9: 55} {
			must(t, s.Wrote(ctx(t), "alice", user, ago(wrote)))
		}
		must(t, s.CheckedIn(ctx(t), "alice", 3, ago(40)))    // quiet since 40h
		must(t, s.CheckedIn(ctx(t), "alice", 4, ago(1)))     // checked in with lately
		must(t, s.DeclineCheckIns(ctx(t), "alice", 5, true)) // said no
		must(t, s.EndSchedule(ctx(t), "alice", 6))           // blocked the bot
		must(t, s.SetTimeZone(ctx(t), "alice", 8, "UTC"))    // never wrote privately
		must(t, s.Wrote(ctx(t), "bob", 1, ago(200)))         // another bot's
		must(t, s.Wrote(ctx(t), "alice", 9, ago(45)))        // wrote again
		since := ago(24)
		wantQuiet(t, s, "alice", since, 0, 2, 1, 9, 3)
		wantQuiet(t, s, "alice", since, 2, 2, 1)
		wantQuiet(t, s, "alice", ago(50), 0, 2)
		wantQuiet(t, s, "bob", since, 0, 1)
		wantQuiet(t, s, "carol", since, 0)
	}},
}

// scheduled is the envelope of a scheduled message for Ann in k.
func scheduled(k message.Key, kind message.ScheduledKind, id, text string) message.Envelope {
	return message.Envelope{Bot: k.Bot, Key: k, Received: base(),
		Scheduled: &message.Scheduled{Kind: kind, ID: id, User: 7, Text: text, Due: base().Add(-time.Second)}}
}

// wantScheduled checks that d hands env's scheduled message over whole,
// with no update.
func wantScheduled(t *testing.T, d message.Delivery, env message.Envelope) {
	t.Helper()
	got := d.Envelope()
	if g, w := got.Scheduled, env.Scheduled; g == nil || g.Kind != w.Kind || g.ID != w.ID || g.User != w.User || g.Text != w.Text ||
		!g.Due.Equal(w.Due) {
		t.Errorf("delivered scheduled message = %+v, want %+v", g, w)
	}
	if got.Bot != env.Bot || got.Key != env.Key || got.Raw != nil || got.UpdateID != 0 || got.Received.IsZero() || got.Accepted {
		t.Errorf("delivered envelope = %+v\nwant %+v", got, env)
	}
}

// nextIsUpdate checks that c's next delivery is update id: nothing
// appended before it in its conversation came (again).
func nextIsUpdate(t *testing.T, c *consumer, id int64) {
	t.Helper()
	d := c.next(t)
	if got := d.Envelope(); got.Scheduled != nil || got.UpdateID != id {
		t.Fatalf("handed %+v (scheduled %+v), want update %d alone", got, got.Scheduled, id)
	}
	d.Done(true)
}

var scheduledTests = []behaviour{
	{"HandedInItsConversationsOrder", func(t *testing.T, s *subject) {
		c := startConsume(t, s)
		rem := scheduled(annAlice, message.Reminder, "r-1", "call mom")
		in := scheduled(annAlice, message.CheckIn, "checkin-7-1", "")
		appendAll(t, s, update(annAlice, 1))
		must(t, s.Append(ctx(t), "", rem))
		appendAll(t, s, update(annAlice, 2))
		must(t, s.Append(ctx(t), "", in))
		got := c.take(t, 4)
		for i, want := range []message.Envelope{update(annAlice, 1), rem, update(annAlice, 2), in} {
			if want.Scheduled != nil {
				wantScheduled(t, got[i], want)
			} else {
				wantEnvelope(t, got[i], want)
			}
			got[i].Done(true)
		}
		// The poller's offset is the last update's: a scheduled message
		// has none.
		wantOffset(t, s, poller, 2)
	}},
	{"AppendedTwiceKeptOnce", func(t *testing.T, s *subject) {
		c := startConsume(t, s)
		rem := scheduled(annAlice, message.Reminder, "r-2", "call mom")
		must(t, s.Append(ctx(t), "", rem))
		must(t, s.Append(ctx(t), "", rem))
		d := c.next(t)
		wantScheduled(t, d, rem)
		// Another bot's of the same id is another.
		bobs := scheduled(annBob, message.Reminder, "r-2", "with bob")
		must(t, s.Append(ctx(t), "", bobs))
		wantScheduled(t, c.next(t), bobs)
		// Appended again while the first is answered, and once answered.
		must(t, s.Append(ctx(t), "", rem))
		d.Done(true)
		must(t, s.Append(ctx(t), "", rem))
		appendAll(t, s, update(annAlice, 3))
		nextIsUpdate(t, c, 3)
	}},
	{"AppendedAgainByTheNextInstanceKeptOnce", func(t *testing.T, s *subject) {
		// A scheduler cut short between Append and DoneReminder: the
		// next process (the next instance) finds it due and appends it
		// again.
		rem := scheduled(annAlice, message.Reminder, "r-3", "call mom")
		must(t, s.Append(ctx(t), "", rem))
		s.restarted()
		must(t, s.Append(ctx(t), "", rem))
		appendAll(t, s, update(annAlice, 4))
		c := startConsume(t, s)
		d := c.next(t)
		wantScheduled(t, d, rem)
		d.Done(true)
		nextIsUpdate(t, c, 4)
		must(t, s.Append(ctx(t), "", rem))
		appendAll(t, s, update(annAlice, 5))
		nextIsUpdate(t, c, 5)
	}},
	{"HandedBackWithItsMarks", func(t *testing.T, s *subject) {
		c := startConsume(t, s)
		in := scheduled(group, message.CheckIn, "checkin-7-2", "")
		must(t, s.Append(ctx(t), "", in))
		d := c.next(t)
		must(t, d.MarkCharged(ctx(t), "voice"))
		must(t, d.MarkAttempt(ctx(t), "voice"))
		c.stop()
		d.Abandon()
		s.restarted()
		c = startConsume(t, s)
		again := c.next(t)
		wantScheduled(t, again, in)
		wantMarks(t, again, true, 1, true)
		again.Done(true)
	}},
	{"ForgetDeletesRemindersContactAndScheduled", func(t *testing.T, s *subject) {
		const secret = "Zanzibar quokka reminder 5813"
		now := base()
		talk(t, s, annAlice, boAlice, group)
		for _, bot := range []string{"alice", "bob"} {
			must(t, s.Wrote(ctx(t), bot, 7, now.Add(-48*time.Hour)))
			must(t, s.SetTimeZone(ctx(t), bot, 7, "Europe/Lisbon"))
		}
		must(t, s.Wrote(ctx(t), "alice", 8, now.Add(-48*time.Hour)))
		addReminder(t, s, remind(annAlice, secret, time.Hour), 0)
		addReminder(t, s, remind(group, "in the group", time.Hour), 0)
		bobs := addReminder(t, s, remind(annBob, "with bob", time.Hour), 0)
		bos := remind(boAlice, "Bo's", time.Hour)
		bos.User = 8
		bos = addReminder(t, s, bos, 0)
		// Due and appended, not answered yet: in her chat and the group's.
		mine, inGroup := scheduled(annAlice, message.Reminder, "r-9", secret), scheduled(group, message.Reminder, "r-10", "in the group")
		must(t, s.Append(ctx(t), "", mine))
		must(t, s.Append(ctx(t), "", inGroup))
		appendAll(t, s, update(group, 6))

		forgot, err := s.ForgetUser(ctx(t), "alice", 7)
		must(t, err)
		if forgot.Reminders != 2 {
			t.Errorf("Forgotten.Reminders = %d, want 2", forgot.Reminders)
		}
		s.restarted()
		wantReminders(t, s, "alice", 7)
		wantReminders(t, s, "bob", 7, bobs)
		wantReminders(t, s, "alice", 8, bos)
		wantContact(t, s, "alice", 7, false, state.Contact{})
		wantContact(t, s, "bob", 7, true, state.Contact{Zone: "Europe/Lisbon", Wrote: now.Add(-48 * time.Hour)})
		wantQuiet(t, s, "alice", now, 0, 8)
		// The group's update is still there; what was scheduled for her
		// is not.
		c := startConsume(t, s)
		nextIsUpdate(t, c, 6)
		c.stop()
		wantNoCopy(t, s, "after the forget", secret)

		forgot, err = s.ForgetUser(ctx(t), "", 7)
		must(t, err)
		if forgot.Reminders != 1 {
			t.Errorf("Forgotten.Reminders of every bot = %d, want 1", forgot.Reminders)
		}
		wantReminders(t, s, "bob", 7)
		wantContact(t, s, "bob", 7, false, state.Contact{})
	}},
}
