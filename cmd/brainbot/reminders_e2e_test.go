package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/toolspec"
)

// The end-to-end suite of reminders and check-ins: the model keeps a
// reminder through brainbot's tool, and at its time the persona writes
// it, once, as text or a voice note by the user's mode, across a restart
// of brainbot; /reminders lists and cancels; a check-in goes to a user
// quiet for the brain's time, under the button that says no; a user who
// blocked the bot gets nothing more. brainbot run with the real Claude
// Code CLI.

// reminderBrain keeps reminders, in Berlin's time, and reads answers aloud
// for users who ask (/voice).
const reminderBrain = `name: Keeper
telegram:
  token_env: KEEPER_TOKEN
system_prompt: You keep reminders for people.
timezone: Europe/Berlin
tts:
  user_toggle: true
reminders:
  enabled: true
  max_pending: 3
`

func TestEndToEndReminders(t *testing.T) { eachMode(t, testReminders) }

func testReminders(t *testing.T, env []string) {
	s := startWith(t, "keeper.yaml", reminderBrain, env)
	const ann, bo = 9, 10
	// Each keeps a reminder a few seconds ahead, and Bo then asks to hear
	// the keeper's answers as voice notes; brainbot restarts before their
	// time.
	due := time.Now().Add(6 * time.Second).Truncate(time.Second)
	remind(t, s, ann, due, "call mom", "said: Reminder ")
	remind(t, s, bo, due, "water the plants", "said: Reminder ")
	if got := wantText(t, ask(t, s, "keeper", bo, "/voice")); !strings.Contains(got, "Voice replies are on") {
		t.Fatalf("/voice answered %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	annsReminder, bosReminder := s.Unprompted("keeper", ann), s.Unprompted("keeper", bo)
	before := map[int64]int{ann: len(s.ChatCalls("keeper", ann)), bo: len(s.ChatCalls("keeper", bo))}
	if code, err := s.Stop(ctx, syscall.SIGTERM); err != nil || code != 0 {
		t.Fatalf("stop: exit %d, %v", code, err)
	}
	if time.Now().After(due) {
		t.Log("brainbot took longer to stop than the reminders took to come due: they came due while it was down")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// At their time the persona writes them: to Ann as text, to Bo as a
	// voice note, each once.
	reminders := map[int64]stack.Reply{}
	for user, p := range map[int64]*stack.Pending{ann: annsReminder, bo: bosReminder} {
		r, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reminders[user] = r
		if reminders[user].Elapsed < time.Until(due) {
			t.Errorf("user %d's reminder came before its time", user)
		}
	}
	if got := wantText(t, reminders[ann]); !strings.Contains(got, "<reminder>call mom</reminder>") || !strings.Contains(got, "remind them") {
		t.Errorf("Ann's reminder reads %q", got)
	}
	if got := reminders[bo].Methods(); len(got) != 1 || got[0] != "sendVoice" {
		t.Errorf("Bo's reminder went as %v, want one voice note", got)
	}
	// Once: after it, each chat gets only the answer to the next message.
	for user, r := range reminders {
		thanks := ask(t, s, "keeper", user, "thanks")
		if got, want := len(s.ChatCalls("keeper", user)), before[user]+len(r.Calls)+len(thanks.Calls); got != want {
			t.Errorf("user %d's chat got %d calls, want %d: the reminder's, then the answer to thanks", user, got, want)
		}
	}

	// /reminders lists Ann's in her zone, under a button each; a tap
	// cancels one, and it does not come.
	later := time.Now().Add(time.Hour)
	remind(t, s, ann, later, "book the dentist", "said: Reminder ")
	remind(t, s, ann, later.Add(time.Hour), "buy bread", "said: Reminder ")
	list, labels, data := question(t, ask(t, s, "keeper", ann, "/reminders"))
	berlin, _ := time.LoadLocation("Europe/Berlin")
	wantList := conversation.RemindersHeading + "\n1. " + later.In(berlin).Format("Mon 2 Jan 15:04") + ": book the dentist\n2. " +
		later.Add(time.Hour).In(berlin).Format("Mon 2 Jan 15:04") + ": buy bread\n\n(Europe/Berlin) " + conversation.RemindersHint
	if got := stack.Rendered(list); got != wantList || !slices.Equal(labels, []string{"✖ 1", "✖ 2"}) {
		t.Fatalf("/reminders answered %q under %v, want %q", got, labels, wantList)
	}
	if notice := waitAnswer(t, s, "keeper", s.Tap("keeper", ann, ann, list.MessageID, data[0])); notice != conversation.NoticeReminderDone {
		t.Errorf("the tap on ✖ 1 answered %q", notice)
	}
	waitEdited(t, s, "keeper", list.MessageID, fmt.Sprintf(conversation.RemindersCancelledOne, 1))
	list, _, _ = question(t, ask(t, s, "keeper", ann, "/reminders"))
	if got := stack.Rendered(list); !strings.HasPrefix(got, conversation.RemindersHeading+"\n1. ") || !strings.Contains(got, "buy bread") ||
		strings.Contains(got, "dentist") {
		t.Errorf("/reminders after a cancel answered %q", got)
	}
}

// remind has user ask the keeper for a reminder of text at due while the
// model keeps it with the tool; the answer must hold want.
func remind(t *testing.T, s *stack.Stack, user int64, due time.Time, text, want string) {
	t.Helper()
	call := fmt.Sprintf(`Remind me. #call %s {"at":%q,"text":%q}`, toolspec.RemindTool, due.Format(time.RFC3339), text)
	got := wantText(t, ask(t, s, "keeper", user, call))
	if !strings.HasPrefix(got, claudetest.ToolsReplyPrefix+toolspec.RemindTool+" ") || !strings.Contains(got, want) {
		t.Fatalf("remind %q answered %q, want %q", text, got, want)
	}
}

// companionBrain checks in on users quiet for 3 seconds, at most twice a
// week, at any hour (the quiet hours, which need the clock, are the
// scheduler's unit tests').
const companionBrain = `name: Companion
telegram:
  token_env: COMPANION_TOKEN
system_prompt: You check in on people.
tts:
  user_toggle: true
reminders:
  enabled: true
check_ins:
  enabled: true
  quiet_for: 3s
  quiet_hours: none
  per_week: 2
`

func TestEndToEndCheckIns(t *testing.T) { eachMode(t, testCheckIns) }

func testCheckIns(t *testing.T, env []string) {
	s := startWith(t, "companion.yaml", companionBrain, env)
	const ann, carol, dan, eve, fay = 9, 11, 12, 13, 14
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	wait := func(p *stack.Pending) stack.Reply {
		t.Helper()
		r, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Quiet for 3 seconds after writing, Ann and Carol hear from the
	// companion first, under the button that says no.
	wantText(t, ask(t, s, "companion", ann, "hello"))
	wantText(t, ask(t, s, "companion", carol, "hello"))
	annsFirst, carols := s.Unprompted("companion", ann), s.Unprompted("companion", carol)
	annsSecond := s.Unprompted("companion", ann)
	if got := wantText(t, wait(annsFirst)); !strings.Contains(got, "has not written to you since") {
		t.Errorf("Ann's check-in reads %q", got)
	}
	checkIn, labels, data := question(t, wait(carols))
	if !slices.Equal(labels, []string{conversation.CheckInDeclineLabel}) {
		t.Fatalf("Carol's check-in %q came under %v", stack.Rendered(checkIn), labels)
	}
	// Carol says no.
	if notice := waitAnswer(t, s, "companion", s.Tap("companion", carol, carol, checkIn.MessageID, data[0])); notice != conversation.NoticeCheckInsOff {
		t.Errorf("the tap answered %q", notice)
	}
	waitEdited(t, s, "companion", checkIn.MessageID, conversation.CheckInsOffAddition)
	// Ann, quiet again, hears again: twice a week.
	wait(annsSecond)

	// Fay has the companion speak (/voice): her check-in is a voice note,
	// under the same button.
	wantText(t, ask(t, s, "companion", fay, "hello"))
	wantText(t, ask(t, s, "companion", fay, "/voice"))
	spoken := wait(s.Unprompted("companion", fay))
	if got := spoken.Methods(); len(got) != 1 || got[0] != "sendVoice" {
		t.Fatalf("Fay's check-in went as %v, want one voice note", got)
	}
	if b := spoken.Calls[0].Buttons(); len(b) != 1 || len(b[0]) != 1 || b[0][0].Text != conversation.CheckInDeclineLabel {
		t.Errorf("Fay's voice check-in came under %v", b)
	}

	// Dan keeps a reminder, then blocks the bot: his check-in is refused,
	// which ends his schedule.
	wantText(t, ask(t, s, "companion", dan, "hello"))
	call := fmt.Sprintf(`Remind me. #call %s {"at":%q,"text":"call mom"}`, toolspec.RemindTool, time.Now().Add(time.Hour).Format(time.RFC3339))
	wantText(t, ask(t, s, "companion", dan, call))
	s.Telegram.Block(stack.Token("companion"), dan)
	if r := wait(s.Unprompted("companion", dan)); r.Summary.Str("outcome") != "blocked" {
		t.Errorf("the check-in to Dan who blocked the bot: %s", r.Summary.Raw)
	}
	waitLine(ctx, t, s, 0, func(l stack.Line) bool {
		return l.Msg == "the user blocked the bot: their reminders and check-ins end" && l.Int("user") == dan
	})

	// Eve, who writes now, is the witness: by her check-in Ann and Carol
	// were quiet long enough again, and Dan too, and none of them heard
	// more: Ann is at the week's bound, Carol said no, Dan blocked the bot.
	wantText(t, ask(t, s, "companion", eve, "hello"))
	wait(s.Unprompted("companion", eve))
	for user, want := range map[int64]int{ann: 2, carol: 1} {
		if n := checkInsTo(t, s, user); n != want {
			t.Errorf("user %d got %d check-ins, want %d", user, n, want)
		}
	}
	// Dan's requests: his hello, his reminder and the check-in refused.
	if n := len(stack.Summaries(s.Logs().Lines(), "companion", dan)); n != 3 {
		t.Errorf("Dan: %d requests, want 3", n)
	}
	// Dan unblocks it and writes again: his reminder is gone.
	s.Telegram.ClearFailures(stack.Token("companion"))
	if got := wantText(t, ask(t, s, "companion", dan, "/reminders")); got != conversation.RemindersEmpty {
		t.Errorf("Dan's /reminders after the block: %q", got)
	}
}

// A check-in waits for the end of the user's quiet hours, in their time
// zone: with the quiet hours around now in the brain's zone (UTC), a
// user there hears nothing, while one who told the persona they live in
// Tokyo, where it is day, hears from it. No clock is set: the hours are
// chosen around the time the test runs.
func TestEndToEndQuietHours(t *testing.T) { eachMode(t, testQuietHours) }

func testQuietHours(t *testing.T, env []string) {
	now := time.Now().UTC()
	hours := now.Add(-time.Hour).Format("15:04") + "-" + now.Add(2*time.Hour).Format("15:04")
	s := startWith(t, "companion.yaml", strings.Replace(companionBrain, "quiet_hours: none", "quiet_hours: \""+hours+"\"", 1), env)
	const ann, bo = 9, 10
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	wantText(t, ask(t, s, "companion", ann, "hello"))
	call := fmt.Sprintf(`I live in Tokyo. #call %s {"zone":"Asia/Tokyo"}`, toolspec.SetTimeZoneTool)
	if got := wantText(t, ask(t, s, "companion", bo, call)); !strings.Contains(got, "said: Kept: the user's time zone is Asia/Tokyo") {
		t.Fatalf("set_time_zone answered %q", got)
	}
	if _, err := s.Unprompted("companion", bo).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Ann was quiet longer than Bo, and is listed first: only her hour
	// kept her check-in back.
	if n := checkInsTo(t, s, ann); n != 0 {
		t.Errorf("Ann, in her quiet hours (%s UTC), got %d check-ins", hours, n)
	}
}

// checkInsTo counts the companion's check-ins in user's chat once it
// answered a message sent now: a check-in appended before it, even in
// the same look as one awaited, is answered before it. The answer is
// awaited by its words, as a check-in may come in its place in the
// stack's count.
func checkInsTo(t *testing.T, s *stack.Stack, user int64) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s.Send("companion", user, "anything new?")
	if _, err := s.Telegram.WaitCall(ctx, stack.Token("companion"), func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.ChatID() == user && strings.Contains(stack.Rendered(c), "You said: anything new?")
	}); err != nil {
		t.Fatalf("no answer to %d: %v", user, err)
	}
	n := 0
	for _, c := range s.ChatCalls("companion", user) {
		if c.Method == "sendMessage" && strings.Contains(stack.Rendered(c), "has not written to you since") {
			n++
		}
	}
	return n
}
