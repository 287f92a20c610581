package jetstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"

	"brainbot/message"
	"brainbot/state"
)

// schedules keeps, in brainbot_schedules, the reminders users asked for
// (state.Reminders) and what check-ins go by (state.Contacts). Each
// user's reminders with a bot are one value, changed by revision, so adds
// at once never pass the bound; their ids come from one counter of the
// bucket's, so none is ever given twice. Each contact is one value too.
// What is due is found by reading every reminder: fine for thousands.
type schedules struct {
	conn *conn
	kv   jsapi.KeyValue
}

var (
	_ state.Reminders = (*schedules)(nil)
	_ state.Contacts  = (*schedules)(nil)
)

// reminderCounter is the key of the last reminder id given.
const reminderCounter = "reminder_id"

func remindersKey(bot string, user int64) string {
	return fmt.Sprintf("reminders.%s.%d", keyPart(bot), user)
}

func contactKey(bot string, user int64) string {
	return fmt.Sprintf("contact.%s.%d", keyPart(bot), user)
}

// reminderList is the value of one user's reminders with one bot, the
// soonest first.
type reminderList struct {
	Reminders []state.Reminder `json:"reminders"`
}

func readReminders(value []byte) []state.Reminder {
	var l reminderList
	_ = json.Unmarshal(value, &l) // written below: unreadable is none
	return l.Reminders
}

func reminderValue(rs []state.Reminder) []byte {
	b, _ := json.Marshal(reminderList{Reminders: rs}) // plain fields: cannot fail
	return b
}

// soonestFirst orders reminders by due time, then by id (the order they
// were kept in).
func soonestFirst(a, b state.Reminder) int {
	return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(len(a.ID), len(b.ID)), cmp.Compare(a.ID, b.ID))
}

// AddReminder keeps r unless its user has limit (> 0) reminders with its
// bot.
func (s *schedules) AddReminder(ctx context.Context, r state.Reminder, limit int) (state.Reminder, error) {
	r.Due, r.Created = r.Due.UTC().Truncate(time.Millisecond), r.Created.UTC().Truncate(time.Millisecond)
	var id int64
	err := s.conn.change(ctx, s.kv, reminderCounter, func(old []byte, _ bool) ([]byte, bool) {
		n, _ := strconv.ParseInt(string(old), 10, 64)
		id = n + 1
		return []byte(strconv.FormatInt(id, 10)), true
	})
	if err != nil {
		return state.Reminder{}, wrap("keep a reminder", err)
	}
	r.ID = strconv.FormatInt(id, 10)
	full := false
	err = s.conn.change(ctx, s.kv, remindersKey(r.Key.Bot, r.User), func(old []byte, _ bool) ([]byte, bool) {
		rs := readReminders(old)
		if full = limit > 0 && len(rs) >= limit; full {
			return nil, false
		}
		rs = append(rs, r)
		slices.SortStableFunc(rs, soonestFirst)
		return reminderValue(rs), true
	})
	switch {
	case err != nil:
		return state.Reminder{}, wrap("keep a reminder", err)
	case full:
		return state.Reminder{}, fmt.Errorf("keep a reminder: %w", state.ErrRemindersFull)
	}
	return r, nil
}

// Reminders lists user's pending reminders with bot, the soonest first.
func (s *schedules) Reminders(ctx context.Context, bot string, user int64) ([]state.Reminder, error) {
	val, _, err := s.conn.get(ctx, s.kv, remindersKey(bot, user))
	if err != nil {
		return nil, wrap("read reminders", err)
	}
	return readReminders(val), nil
}

// CancelReminder deletes user's reminder id with bot.
func (s *schedules) CancelReminder(ctx context.Context, bot string, user int64, id string) (bool, error) {
	gone, err := s.dropReminder(ctx, remindersKey(bot, user), id)
	return gone, wrap("cancel a reminder", err)
}

// dropReminder deletes reminder id from the list at key; false if it is
// not there. An emptied list is kept: it says nothing of its user.
func (s *schedules) dropReminder(ctx context.Context, key, id string) (bool, error) {
	gone := false
	err := s.conn.change(ctx, s.kv, key, func(old []byte, found bool) ([]byte, bool) {
		rs := readReminders(old)
		before := len(rs)
		rs = slices.DeleteFunc(rs, func(r state.Reminder) bool { return r.ID == id })
		if gone = len(rs) < before; !gone {
			return nil, false
		}
		return reminderValue(rs), true
	})
	return gone, err
}

// DueReminders reads every reminder and lists those due at now or
// earlier, the soonest first, at most limit (0: all).
func (s *schedules) DueReminders(ctx context.Context, now time.Time, limit int) ([]state.Reminder, error) {
	var due []state.Reminder
	err := scan(ctx, s.kv, "reminders.>", func(_ string, value []byte) {
		for _, r := range readReminders(value) {
			if !r.Due.After(now) {
				due = append(due, r)
			}
		}
	})
	if err != nil {
		return nil, wrap("read due reminders", err)
	}
	slices.SortFunc(due, soonestFirst)
	if limit > 0 && len(due) > limit {
		due = due[:limit]
	}
	return due, nil
}

// DoneReminder deletes reminder id of bot, wherever its user's list is.
func (s *schedules) DoneReminder(ctx context.Context, bot, id string) error {
	var holder string
	err := scan(ctx, s.kv, "reminders."+keyPart(bot)+".*", func(key string, value []byte) {
		if slices.ContainsFunc(readReminders(value), func(r state.Reminder) bool { return r.ID == id }) {
			holder = key
		}
	})
	if err == nil && holder != "" {
		_, err = s.dropReminder(ctx, holder, id)
	}
	return wrap("clear a reminder", err)
}

// contactValue is a contact as the bucket keeps it.
type contactValue struct {
	Zone     string      `json:"zone,omitempty"`
	Wrote    time.Time   `json:"wrote,omitzero"`
	CheckIns []time.Time `json:"check_ins,omitempty"`
	Declined bool        `json:"declined,omitempty"`
	Blocked  bool        `json:"blocked,omitempty"`
}

func (v contactValue) contact(bot string, user int64) state.Contact {
	return state.Contact{Bot: bot, User: user, Zone: v.Zone, Wrote: v.Wrote, CheckIns: v.CheckIns, Declined: v.Declined, Blocked: v.Blocked}
}

// quietSince is when the contact was last heard from or written to.
func (v contactValue) quietSince() time.Time {
	if n := len(v.CheckIns); n > 0 && v.CheckIns[n-1].After(v.Wrote) {
		return v.CheckIns[n-1]
	}
	return v.Wrote
}

// Contact is user's with bot.
func (s *schedules) Contact(ctx context.Context, bot string, user int64) (state.Contact, bool, error) {
	val, found, err := s.conn.get(ctx, s.kv, contactKey(bot, user))
	if err != nil || !found {
		return state.Contact{Bot: bot, User: user}, false, wrap("read a contact", err)
	}
	var v contactValue
	if err := json.Unmarshal(val, &v); err != nil {
		return state.Contact{Bot: bot, User: user}, false, fmt.Errorf("read a contact: %w", err)
	}
	return v.contact(bot, user), !v.Wrote.IsZero(), nil
}

// changeContact applies step to user's contact with bot, made first if
// there is none.
func (s *schedules) changeContact(ctx context.Context, what, bot string, user int64, step func(*contactValue)) error {
	err := s.conn.change(ctx, s.kv, contactKey(bot, user), func(old []byte, _ bool) ([]byte, bool) {
		var v contactValue
		_ = json.Unmarshal(old, &v) // none yet: a new contact
		step(&v)
		b, _ := json.Marshal(v) // plain fields: cannot fail
		return b, true
	})
	return wrap(what, err)
}

// Wrote records that user wrote to bot privately at now: a block is over.
func (s *schedules) Wrote(ctx context.Context, bot string, user int64, now time.Time) error {
	now = now.UTC().Truncate(time.Millisecond)
	return s.changeContact(ctx, "record a message", bot, user, func(v *contactValue) {
		if now.After(v.Wrote) {
			v.Wrote = now
		}
		v.Blocked = false
	})
}

// SetTimeZone keeps user's time zone with bot.
func (s *schedules) SetTimeZone(ctx context.Context, bot string, user int64, zone string) error {
	return s.changeContact(ctx, "keep a time zone", bot, user, func(v *contactValue) { v.Zone = zone })
}

// DeclineCheckIns records user's no, or their yes again.
func (s *schedules) DeclineCheckIns(ctx context.Context, bot string, user int64, declined bool) error {
	return s.changeContact(ctx, "record a no to check-ins", bot, user, func(v *contactValue) { v.Declined = declined })
}

// CheckedIn adds at to user's check-ins with bot, keeping those of the
// week up to the latest.
func (s *schedules) CheckedIn(ctx context.Context, bot string, user int64, at time.Time) error {
	at = at.UTC().Truncate(time.Millisecond)
	return s.changeContact(ctx, "record a check-in", bot, user, func(v *contactValue) {
		times := append(slices.Clone(v.CheckIns), at)
		slices.SortFunc(times, time.Time.Compare)
		from := times[len(times)-1].Add(-state.CheckInsKept)
		v.CheckIns = slices.DeleteFunc(times, func(t time.Time) bool { return !t.After(from) })
	})
}

// EndSchedule deletes user's reminders with bot and marks them blocked.
func (s *schedules) EndSchedule(ctx context.Context, bot string, user int64) error {
	key := remindersKey(bot, user)
	err := s.conn.patiently(ctx, "end a schedule", func(ctx context.Context) error { return s.kv.Purge(ctx, key) })
	if err != nil {
		return fmt.Errorf("end a schedule: %w", err)
	}
	return s.changeContact(ctx, "end a schedule", bot, user, func(v *contactValue) { v.Blocked = true })
}

// QuietContacts reads bot's contacts and lists those quiet since since,
// the longest quiet first, at most limit (0: all).
func (s *schedules) QuietContacts(ctx context.Context, bot string, since time.Time, limit int) ([]state.Contact, error) {
	type quiet struct {
		v    contactValue
		user int64
	}
	var found []quiet
	err := scan(ctx, s.kv, "contact."+keyPart(bot)+".*", func(key string, value []byte) {
		var v contactValue
		user, err := strconv.ParseInt(key[strings.LastIndexByte(key, '.')+1:], 10, 64)
		if err != nil || json.Unmarshal(value, &v) != nil || v.Wrote.IsZero() || v.Declined || v.Blocked || !v.quietSince().Before(since) {
			return
		}
		found = append(found, quiet{v, user})
	})
	if err != nil {
		return nil, wrap("list quiet contacts", err)
	}
	slices.SortFunc(found, func(a, b quiet) int {
		return cmp.Or(a.v.quietSince().Compare(b.v.quietSince()), cmp.Compare(a.user, b.user))
	})
	if limit > 0 && len(found) > limit {
		found = found[:limit]
	}
	out := make([]state.Contact, len(found))
	for i, q := range found {
		out[i] = q.v.contact(bot, q.user)
	}
	return out, nil
}

// forgetSchedules purges user's reminders and contact with bot ("": every
// bot) and counts the reminders.
func (u *userData) forgetSchedules(ctx context.Context, bot string, user int64) (int, error) {
	var keys []string
	count := 0
	err := scan(ctx, u.schedules, "*.>", func(key string, value []byte) {
		parts := strings.Split(key, ".")
		if len(parts) != 3 || parts[2] != fmt.Sprint(user) || bot != "" && parts[1] != keyPart(bot) {
			return
		}
		if parts[0] == "reminders" {
			count += len(readReminders(value))
		}
		keys = append(keys, key)
	})
	for _, key := range keys {
		if err == nil {
			err = u.conn.patiently(ctx, "forget "+key, func(ctx context.Context) error { return u.schedules.Purge(ctx, key) })
		}
	}
	return count, err
}

// forgetScheduled deletes from the stream the scheduled messages for user
// with bot ("": every bot) not answered yet, in any conversation (a
// reminder set in a group): it reads every message the stream still
// holds, which are the unanswered ones.
func (u *userData) forgetScheduled(ctx context.Context, bot string, user int64) error {
	info, err := u.updates.Info(ctx)
	if err != nil {
		return err
	}
	who := strconv.FormatInt(user, 10)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; {
		m, err := u.updates.GetMsg(ctx, seq, jsapi.WithGetMsgSubject(partPrefix+".>"))
		if errors.Is(err, jsapi.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		seq = m.Sequence + 1
		if m.Header.Get(scheduledHeader) != who || bot != "" && m.Header.Get(botHeader) != bot {
			continue
		}
		if err := u.updates.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jsapi.ErrMsgNotFound) {
			return err
		}
	}
	return nil
}

// scheduledOf is what a scheduled message of the stream holds (its data:
// the message.Scheduled as JSON); nil for an update from Telegram.
func scheduledOf(h nats.Header, data []byte) *message.Scheduled {
	if h.Get(scheduledHeader) == "" {
		return nil
	}
	sch := new(message.Scheduled)
	_ = json.Unmarshal(data, sch) // published by Publish: plain fields
	return sch
}
