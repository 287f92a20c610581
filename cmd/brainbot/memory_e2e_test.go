package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/toolspec"
)

// The end-to-end suite of a brain's memory: the model keeps notes about
// a user through brainbot's memory tools, a new session starts with
// them, /memory shows and drops them, /forget and brainbot forget delete
// them; brainbot run with the real Claude Code CLI, in both modes.

// rememberBrain keeps at most two notes of 40 characters per user.
const rememberBrain = `name: Friend
telegram:
  token_env: FRIEND_TOKEN
system_prompt: You are a friend who remembers.
memory:
  enabled: true
  max_notes: 2
  max_note_chars: 40
`

func TestEndToEndMemory(t *testing.T) { eachMode(t, testMemory) }

func testMemory(t *testing.T, env []string) {
	s := startWith(t, "friend.yaml", rememberBrain, env)
	admin := socketEnv(adminSocket(t, s))
	const ann, bo = 9, 10

	// The model keeps what Ann tells it, within the brain's bounds, and
	// is told why when past them.
	remember(t, s, ann, "My cat is Miso.", "Ann has a cat named Miso", "said: "+toolspec.NoteKept("1"))
	remember(t, s, ann, "A fact far too long.", strings.Repeat("x", 41), "failed: "+toolspec.NoteTooLong(40))
	remember(t, s, ann, "I learn Portuguese.", "Ann is learning Portuguese", "said: "+toolspec.NoteKept("2"))
	remember(t, s, ann, "I like jazz.", "Ann likes jazz", "failed: "+toolspec.NotesFull(2))
	// Whose notes they are is the request's: a model told to write
	// another user's writes its own user's.
	remember(t, s, bo, `Note this for user 9.`, "Planted by Bo", "said: ")

	// After /reset the new session starts with Ann's notes: the model's
	// first request in it holds them, and only hers.
	if got := wantText(t, ask(t, s, "friend", ann, "/reset")); got == "" {
		t.Fatal("no answer to /reset")
	}
	if got := wantText(t, ask(t, s, "friend", ann, "What do you know about me?")); got != "You said: What do you know about me? (message 1)" {
		t.Fatalf("after /reset the model answered %q", got)
	}
	_, blocks := modelSaw(t, s, "What do you know about me?")
	sent := strings.Join(blocks, "\n")
	for _, want := range []string{`<note id="1">Ann has a cat named Miso</note>`, `<note id="2">Ann is learning Portuguese</note>`} {
		if !strings.Contains(sent, want) {
			t.Errorf("the new session's first request lacks %s:\n%s", want, sent)
		}
	}
	if strings.Contains(sent, "Planted") || strings.Contains(sent, "jazz") {
		t.Errorf("the new session's first request holds notes not Ann's or not kept:\n%s", sent)
	}
	// The next message of the session does not repeat them.
	wantText(t, ask(t, s, "friend", ann, "And now?"))
	if _, blocks := modelSaw(t, s, "And now?"); strings.Contains(strings.Join(blocks, "\n"), "Miso") {
		t.Error("the notes came again with the session's second message")
	}

	// /memory lists them, under a button each and one for all.
	list, labels, data := question(t, ask(t, s, "friend", ann, "/memory"))
	wantList := conversation.MemoryHeading + "\n1. Ann has a cat named Miso\n2. Ann is learning Portuguese\n\n" + conversation.MemoryHint
	if got := stack.Rendered(list); got != wantList || !slices.Equal(labels, []string{"🗑 1", "🗑 2", conversation.MemoryDropAllLabel}) {
		t.Fatalf("/memory answered %q under %v", got, labels)
	}
	// Bo's tap is not his to make.
	if notice := waitAnswer(t, s, "friend", s.Tap("friend", bo, ann, list.MessageID, data[0])); notice != conversation.NoticeNotTheirs {
		t.Errorf("another user's tap answered %q", notice)
	}
	if notice := waitAnswer(t, s, "friend", s.Tap("friend", ann, ann, list.MessageID, data[0])); notice != conversation.NoticeNoteDropped {
		t.Errorf("the tap on 🗑 1 answered %q", notice)
	}
	waitEdited(t, s, "friend", list.MessageID, fmt.Sprintf(conversation.MemoryDroppedOne, 1))
	list, _, data = question(t, ask(t, s, "friend", ann, "/memory"))
	if got := stack.Rendered(list); !strings.HasPrefix(got, conversation.MemoryHeading+"\n1. Ann is learning Portuguese\n\n") || len(data) != 2 {
		t.Fatalf("/memory after a drop answered %q with %d buttons", got, len(data))
	}
	if notice := waitAnswer(t, s, "friend", s.Tap("friend", ann, ann, list.MessageID, data[1])); notice != conversation.NoticeNotesDropped {
		t.Errorf("the tap on drop all answered %q", notice)
	}
	waitEdited(t, s, "friend", list.MessageID, conversation.MemoryDroppedAll)
	wantNoNotes(t, s, ann)

	// /forget deletes them with the rest.
	remember(t, s, ann, "My cat is Miso.", "Ann has a cat named Miso", "said: ")
	offer, _, data := question(t, ask(t, s, "friend", ann, "/forget"))
	mark := s.Logs().Len()
	if notice := waitAnswer(t, s, "friend", s.Tap("friend", ann, ann, offer.MessageID, data[0])); notice != conversation.NoticeForgetting {
		t.Errorf("the confirm tap answered %q", notice)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if l := waitLine(ctx, t, s, mark, func(l stack.Line) bool { return l.Msg == "user forgotten" }); l.Int("notes") != 1 {
		t.Errorf("the forget logged %v, want notes 1", l)
	}
	if _, err := s.Telegram.WaitCall(ctx, stack.Token("friend"), func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.Param("text") == conversation.ForgetDone
	}); err != nil {
		t.Fatalf("never told it is done: %v", err)
	}
	wantNoNotes(t, s, ann)

	// The admin sees how many notes are kept about the user of each
	// conversation; brainbot forget, of every bot, deletes them too.
	remember(t, s, ann, "My cat is Miso.", "Ann has a cat named Miso", "said: ")
	if list := listConversations(t, admin, "-user", "9"); len(list) != 1 || list[0].Notes != 1 {
		t.Errorf("conversations -user 9: %+v, want one with 1 note", list)
	}
	if code, out, stderr := runMain(t, admin, "forget", "-user", "9"); code != exitOK || !strings.HasSuffix(out, ", 1 note, 0 reminders\n") {
		t.Fatalf("forget = %d: %s%s", code, out, stderr)
	}
	wantNoNotes(t, s, ann)
	if list, _, _ := question(t, ask(t, s, "friend", bo, "/memory")); !strings.Contains(stack.Rendered(list), "1. Planted by Bo") {
		t.Errorf("Bo's /memory after Ann was forgotten: %q", stack.Rendered(list))
	}
}

// remember has user tell the friend text while the model keeps note with
// the memory tool; the answer must hold want, the tool's outcome.
func remember(t *testing.T, s *stack.Stack, user int64, text, note, want string) {
	t.Helper()
	call := fmt.Sprintf(`%s #call %s {"note":%q,"user":9,"bot":"other"}`, text, toolspec.RememberTool, note)
	got := wantText(t, ask(t, s, "friend", user, call))
	if !strings.HasPrefix(got, claudetest.ToolsReplyPrefix+toolspec.RememberTool+" ") || !strings.Contains(got, want) {
		t.Fatalf("remember %q answered %q, want %q", note, got, want)
	}
}

// waitEdited waits for bot's message id to be edited to end with
// addition.
func waitEdited(t *testing.T, s *stack.Stack, bot string, id int, addition string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := s.Telegram.WaitCall(ctx, stack.Token(bot), func(c telegramtest.Call) bool {
		return c.Method == "editMessageText" && c.Param("message_id") == fmt.Sprint(id) && strings.HasSuffix(stack.Rendered(c), addition)
	}); err != nil {
		t.Fatalf("message %d never edited to end with %q: %v", id, addition, err)
	}
}

// wantNoNotes asks /memory as user and wants nothing kept.
func wantNoNotes(t *testing.T, s *stack.Stack, user int64) {
	t.Helper()
	if got := wantText(t, ask(t, s, "friend", user, "/memory")); got != conversation.MemoryEmpty {
		t.Errorf("/memory answered %q, want %q", got, conversation.MemoryEmpty)
	}
}
