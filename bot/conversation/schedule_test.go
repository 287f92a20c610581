package conversation

// Reminders and check-ins at the ports: what the model is told and may
// call, what came due written by the persona (or, past the limits, a
// reminder in the user's words), the button and command that say no to
// check-ins, /reminders with its buttons, and a block that ends it all,
// over the real store.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/state"
	"brainbot/ticket"
	"brainbot/toolspec"
)

const scheduleBrain = "timezone: Asia/Tokyo\nreminders:\n  enabled: true\n  max_pending: 3\n  max_ahead: 48h\n" +
	"check_ins:\n  enabled: true\n"

// due is a reminder or check-in for kitUser that came due, as the intake
// hands it on.
func (k *kit) due(kind message.ScheduledKind, id, text string) *message.Inbound {
	s := &message.Scheduled{Kind: kind, ID: id, User: kitUser, Text: text, Due: time.Now().Add(-time.Second)}
	return k.inbound(message.Update{Kind: message.Written, Key: message.Key{Bot: kitBot, Chat: kitUser}, ChatType: "private",
		Sender: kitUser, Scheduled: s})
}

func (k *kit) remind(text string, due time.Time) {
	k.t.Helper()
	r := state.Reminder{Key: message.Key{Bot: kitBot, Chat: kitUser}, User: kitUser, Text: text, Due: due, Created: time.Now()}
	if _, err := k.store.AddReminder(context.Background(), r, 0); err != nil {
		k.t.Fatal(err)
	}
}

func (k *kit) contact() state.Contact {
	k.t.Helper()
	c, _, err := k.store.Contact(context.Background(), kitBot, kitUser)
	if err != nil {
		k.t.Fatal(err)
	}
	return c
}

// A private message is told the user's local time, may keep their
// reminders and zone within the brain's bounds, and is recorded as the
// user writing; a group's is neither.
func TestScheduleOfAPrivateMessage(t *testing.T) {
	k := newKit(t, scheduleBrain)
	k.serve(k.private("remind me at nine"))
	req := k.lastRequest()
	want := ticket.Memory{Bot: kitBot, User: kitUser, Schedule: true, MaxPending: 3, MaxAhead: 48 * time.Hour, Zone: "Asia/Tokyo"}
	if !req.Memory || req.Notes != want {
		t.Errorf("request Memory %v, Notes %+v; want %+v", req.Memory, req.Notes, want)
	}
	for _, tool := range []string{toolspec.RemindTool, toolspec.CancelReminderTool, toolspec.SetTimeZoneTool} {
		if !slices.Contains(req.AllowedTools, tool) {
			t.Errorf("allowed tools %q lack %s", req.AllowedTools, tool)
		}
	}
	if !strings.Contains(req.Context, "The user's local time now: ") || !strings.Contains(req.Context, "(Asia/Tokyo).") {
		t.Errorf("context %q", req.Context)
	}
	if c := k.contact(); c.Wrote.IsZero() {
		t.Error("the user's message is not recorded as their writing")
	}
	k.serve(k.inGroup(8, "Bo", "hello"))
	if req := k.lastRequest(); req.Notes.Schedule || strings.Contains(req.Context, "local time") {
		t.Errorf("a group's request: Notes %+v, context %q", req.Notes, req.Context)
	}
	if _, ok, _ := k.store.Contact(context.Background(), kitBot, 8); ok {
		t.Error("a group message made a contact")
	}
}

// A reminder that came due is written by the persona in its session,
// the user's words quoted as data; counted against the daily limit, and
// past it sent in the user's own words. A check-in past the limit is
// not sent at all.
func TestReminderWrittenByThePersona(t *testing.T) {
	k := newKit(t, scheduleBrain+"limits:\n  per_user_per_day: 1\n")
	in := k.due(message.Reminder, "reminder/1", "call mom <3")
	k.serve(in)
	req := k.lastRequest()
	if !strings.Contains(req.Prompt, "<reminder>call mom &lt;3</reminder>") || !strings.Contains(req.Prompt, "remind them") {
		t.Errorf("prompt %q", req.Prompt)
	}
	if k.outcome(in.RequestID) != "ok" {
		t.Errorf("outcome %q", k.outcome(in.RequestID))
	}
	again := k.due(message.Reminder, "reminder/2", "water the plants")
	k.serve(again)
	if out := k.ev.Of("out"); out[len(out)-1] != fmt.Sprintf("text %q formatted=false", fmt.Sprintf(ReminderFallback, "water the plants")) {
		t.Errorf("past the limit: %q", out[len(out)-1])
	}
	if n := len(k.agent.requests()); n != 1 {
		t.Errorf("the model was asked %d times", n)
	}
	checkIn := k.due(message.CheckIn, "check-in/7/1", "")
	k.serve(checkIn)
	if got := k.outcome(checkIn.RequestID); !strings.Contains(got, "check-in dropped") {
		t.Errorf("a check-in past the limit: outcome %q", got)
	}
}

// A reminder the model failed to write goes out in the user's words,
// not as the brain's error message, which would answer nothing they
// sent.
func TestReminderTheModelFailed(t *testing.T) {
	k := newKit(t, scheduleBrain)
	k.agent.answer = func(context.Context, claude.Request) (*claude.Result, error) { return nil, errors.New("the CLI died") }
	in := k.due(message.Reminder, "reminder/1", "call mom")
	k.serve(in)
	k.want("out", fmt.Sprintf("text %q formatted=false", fmt.Sprintf(ReminderFallback, "call mom")))
	if got := k.outcome(in.RequestID); got != "error, reminder sent as asked" {
		t.Errorf("outcome %q", got)
	}
}

// declineCheckIns taps the button under the newest message, the
// check-in's: the user's no, recorded. It returns the message.
func (k *kit) declineCheckIns() int {
	k.t.Helper()
	msg, button := k.chats.newestSent(), k.chats.buttons[len(k.chats.buttons)-1]
	if _, _, notice := k.tap(k.privateTap(msg, button)); notice != NoticeCheckInsOff {
		k.t.Errorf("the tap answered %q", notice)
	}
	if !k.contact().Declined {
		k.t.Error("the tap did not record the user's no")
	}
	return msg
}

// A check-in says when the user last wrote and goes under the button
// that says no; its tap is the user's no, and a check-in appended before
// it is not written. /checkins on says yes again.
func TestCheckInAndTheUsersNo(t *testing.T) {
	k := newKit(t, scheduleBrain)
	k.serve(k.private("hello"))
	in := k.due(message.CheckIn, "check-in/7/1", "")
	k.serve(in)
	if req := k.lastRequest(); !strings.Contains(req.Prompt, "has not written to you since") || !req.Resume {
		t.Errorf("check-in request: resume %v, prompt %q", req.Resume, req.Prompt)
	}
	out := k.ev.Of("out")
	if got := out[len(out)-2:]; !slices.Equal(got, []string{fmt.Sprintf("attach %q", []string{CheckInDeclineLabel}),
		fmt.Sprintf("text %q formatted=true", "Hello, Ann.")}) {
		t.Fatalf("check-in sent %q", got)
	}
	k.declineCheckIns()
	late := k.due(message.CheckIn, "check-in/7/2", "")
	k.serve(late)
	if got := k.outcome(late.RequestID); got != "check-in declined" || len(k.agent.requests()) != 2 {
		t.Errorf("a check-in after the no: outcome %q, %d requests", got, len(k.agent.requests()))
	}
	k.serve(k.private("/checkins on"))
	if k.contact().Declined {
		t.Error("/checkins on did not say yes again")
	}
	k.serve(k.private("/checkins off"))
	if !k.contact().Declined {
		t.Error("/checkins off did not say no")
	}
}

// A check-in spoken (the brain answers in voice) goes under the button too,
// as the voice note's; its tap takes the button away, with no words to
// amend under a note.
func TestVoiceCheckInUnderItsButton(t *testing.T) {
	k := newKit(t, scheduleBrain+"tts:\n  enabled: true\n")
	k.serve(k.private("hello"))
	k.agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		return k.writeFile(req, "audio-output", ".mp3")
	}
	k.serve(k.due(message.CheckIn, "check-in/7/1", ""))
	out := k.ev.Of("out")
	if got := out[len(out)-2:]; got[0] != fmt.Sprintf("attach %q", []string{CheckInDeclineLabel}) ||
		!strings.HasPrefix(got[1], fmt.Sprintf("file %d audio-output/", message.VoiceNote)) {
		t.Fatalf("check-in sent %q, want the voice note under the button", got)
	}
	msg := k.declineCheckIns()
	if out := k.ev.Of("out"); out[len(out)-1] != fmt.Sprintf("drop buttons %d", msg) {
		t.Errorf("after the tap %q, want the button taken away", out[len(out)-1])
	}
}

// The model may call the memory server's tools its brain keeps: a brain
// with reminders and no memory offers no note tool, whose refusal would
// tell the model notes are kept in private chats.
func TestMemoryServerToolsByBrain(t *testing.T) {
	for _, c := range []struct {
		brain     string
		want, not []string
	}{
		{scheduleBrain, []string{toolspec.RemindTool, toolspec.SetTimeZoneTool}, []string{toolspec.RememberTool, toolspec.ForgetNoteTool}},
		{"memory:\n  enabled: true\n", []string{toolspec.RememberTool, toolspec.ForgetNoteTool}, []string{toolspec.RemindTool, toolspec.SetTimeZoneTool}},
	} {
		k := newKit(t, c.brain)
		k.serve(k.private("hello"))
		req := k.lastRequest()
		if !req.Memory {
			t.Errorf("%q: no memory server", c.brain)
		}
		for _, tool := range c.want {
			if !slices.Contains(req.AllowedTools, tool) {
				t.Errorf("%q: %s not allowed: %q", c.brain, tool, req.AllowedTools)
			}
		}
		for _, tool := range c.not {
			if slices.Contains(req.AllowedTools, tool) {
				t.Errorf("%q: %s allowed: %q", c.brain, tool, req.AllowedTools)
			}
		}
	}
}

// /reminders lists the user's reminders in their zone under a button
// each; a tap cancels one and says so under the list.
func TestRemindersCommand(t *testing.T) {
	k := newKit(t, scheduleBrain)
	k.serve(k.private("/reminders"))
	k.want("out", fmt.Sprintf("text %q formatted=false", RemindersEmpty))
	due := time.Date(2030, 3, 1, 0, 30, 0, 0, time.UTC) // 09:30 in Tokyo
	k.remind("call mom", due)
	k.remind("water the plants", due.Add(time.Hour))
	k.serve(k.private("/reminders"))
	list := RemindersHeading + "\n1. Fri 1 Mar 09:30: call mom\n2. Fri 1 Mar 10:30: water the plants\n\n(Asia/Tokyo) " + RemindersHint
	out := k.ev.Of("out")
	if got := out[len(out)-2:]; !slices.Equal(got, []string{fmt.Sprintf("attach %q", []string{"✖ 1", "✖ 2"}),
		fmt.Sprintf("text %q formatted=true", list)}) {
		t.Fatalf("/reminders answered %q", got)
	}
	msg, buttons := k.chats.newestSent(), k.chats.buttons
	if _, _, notice := k.tap(k.privateTap(msg, buttons[0])); notice != NoticeReminderDone {
		t.Errorf("the tap on ✖ 1 answered %q", notice)
	}
	if out := k.ev.Of("out"); out[len(out)-1] != fmt.Sprintf("amend %d %q", msg, fmt.Sprintf(RemindersCancelledOne, 1)) {
		t.Errorf("after the tap: %q", out[len(out)-1])
	}
	if _, _, notice := k.tap(k.privateTap(msg, buttons[0])); notice != NoticeReminderGone {
		t.Errorf("a second tap answered %q", notice)
	}
	rs, err := k.store.Reminders(context.Background(), kitBot, kitUser)
	if err != nil || len(rs) != 1 || rs[0].Text != "water the plants" {
		t.Errorf("reminders left %+v, %v", rs, err)
	}
}

// An answer Telegram refuses because the user blocked the bot ends their
// schedule: their reminders go, and no check-in goes to them.
func TestBlockEndsTheSchedule(t *testing.T) {
	k := newKit(t, scheduleBrain)
	k.serve(k.private("hello"))
	k.remind("call mom", time.Now().Add(time.Hour))
	k.chats.mu.Lock()
	k.chats.blocked = true
	k.chats.mu.Unlock()
	in := k.due(message.CheckIn, "check-in/7/1", "")
	k.serve(in)
	if got := k.outcome(in.RequestID); got != "blocked" {
		t.Errorf("outcome %q", got)
	}
	if !k.contact().Blocked {
		t.Error("the contact is not marked blocked")
	}
	if rs, _ := k.store.Reminders(context.Background(), kitBot, kitUser); len(rs) != 0 {
		t.Errorf("reminders left %+v", rs)
	}
}
