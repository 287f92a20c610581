package conversation

// A brain's memory at the ports: whose notes a request's tools keep, the
// notes ahead of a new session's first message (and not after), groups,
// and /memory with its buttons, over the real store.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/state/statetest"
	"brainbot/ticket"
)

const memoryBrain = "memory:\n  enabled: true\n  max_notes: 3\n  max_note_chars: 50\n"

// note keeps text as user's note with the kit's bot.
func (k *kit) note(user int64, text string) string {
	k.t.Helper()
	n, err := k.store.AddNote(context.Background(), kitBot, user, text, 0, time.Now())
	if err != nil {
		k.t.Fatal(err)
	}
	return n.ID
}

func (k *kit) lastRequest() claude.Request {
	k.t.Helper()
	reqs := k.agent.requests()
	if len(reqs) == 0 {
		k.t.Fatal("the model was never asked")
	}
	return reqs[len(reqs)-1]
}

// A private chat's requests keep the sender's notes with the bot; the
// first of a session starts with them, escaped, and the next does not
// repeat them; after /reset the new session starts with them again.
func TestNotesStartANewSession(t *testing.T) {
	k := newKit(t, memoryBrain)
	k.note(kitUser, "Has a cat named <Miso>")
	k.note(8, "Bo's note")
	k.serve(k.private("hello"))
	first := k.lastRequest()
	want := ticket.Memory{Bot: kitBot, User: kitUser, MaxNotes: 3, MaxNoteChars: 50}
	if !first.Memory || first.Notes != want {
		t.Errorf("request Memory %v, Notes %+v; want %+v", first.Memory, first.Notes, want)
	}
	if !strings.Contains(first.Context, `<note id="1">Has a cat named &lt;Miso&gt;</note>`) || strings.Contains(first.Context, "Bo's") {
		t.Errorf("the new session's first request's context:\n%s", first.Context)
	}
	k.serve(k.private("and then?"))
	if next := k.lastRequest(); !next.Resume || strings.Contains(next.Context, "Miso") {
		t.Errorf("the session's second request (resume %v) repeats the notes:\n%s", next.Resume, next.Context)
	}
	k.serve(k.private("/reset"))
	k.serve(k.private("hello again"))
	if again := k.lastRequest(); again.Resume || !strings.Contains(again.Context, "Miso") {
		t.Errorf("after /reset (resume %v) the notes did not come:\n%s", again.Resume, again.Context)
	}
}

// A session the CLI lost is retried in a new one, which starts with the
// notes too; a reply's context stays beside them.
func TestNotesStartTheSessionAfterALostOne(t *testing.T) {
	k := newKit(t, memoryBrain)
	k.note(kitUser, "Has a cat named Miso")
	in := k.private("hello")
	in.ReplyTo = &message.Reply{Text: "an earlier answer", Mine: true}
	k.loseSession(in)
	k.serve(in)
	reqs := k.agent.requests()
	if len(reqs) != 2 || strings.Contains(reqs[0].Context, "Miso") || !strings.Contains(reqs[1].Context, "Miso") ||
		!strings.Contains(reqs[1].Context, "an earlier answer") || strings.Count(reqs[1].Context, "<notes>") != 1 {
		t.Errorf("contexts %q", []string{reqs[0].Context, reqs[len(reqs)-1].Context})
	}
}

// In a group the notes stay out, and the tools keep none, unless the
// brain says memory.groups; then each message brings its sender's.
func TestNotesInGroups(t *testing.T) {
	k := newKit(t, memoryBrain)
	k.note(kitUser, "Has a cat named Miso")
	k.serve(k.inGroup(kitUser, "Ann", "hello"))
	if req := k.lastRequest(); !req.Memory || req.Notes != (ticket.Memory{}) || strings.Contains(req.Context, "Miso") {
		t.Errorf("a group's request: Memory %v, Notes %+v, context %q", req.Memory, req.Notes, req.Context)
	}

	// A guest answer goes out in someone else's chat: none either.
	guest := k.private("hello")
	guest.Key, guest.Guest = message.GuestKey(kitBot, kitGroup, kitUser), &message.Guest{QueryID: "q1"}
	k.serve(guest)
	if req := k.lastRequest(); req.Notes != (ticket.Memory{}) || strings.Contains(req.Context, "Miso") {
		t.Errorf("a guest answer's request: Notes %+v, context %q", req.Notes, req.Context)
	}

	k = newKit(t, memoryBrain+"  groups: true\n")
	k.note(kitUser, "Has a cat named Miso")
	k.note(8, "Bo works nights")
	for i, who := range []struct {
		user     int64
		name     string
		has, not string
	}{{kitUser, "Ann", "Miso", "nights"}, {8, "Bo", "nights", "Miso"}, {kitUser, "Ann", "Miso", "nights"}} {
		k.serve(k.inGroup(who.user, who.name, "hello"))
		req := k.lastRequest()
		if req.Notes.User != who.user || !strings.Contains(req.Context, who.has) || strings.Contains(req.Context, who.not) ||
			!strings.Contains(req.Context, fmt.Sprintf("the sender of this message, %q", who.name)) {
			t.Errorf("message %d of %s: Notes %+v, context %q", i+1, who.name, req.Notes, req.Context)
		}
	}
}

// A brain without memory offers no tools, keeps no notes and knows no
// /memory.
func TestNoMemoryWithoutTheBrain(t *testing.T) {
	k := newKit(t, "")
	k.note(kitUser, "Has a cat named Miso")
	k.serve(k.private("hello"))
	if req := k.lastRequest(); req.Memory || req.Notes != (ticket.Memory{}) || strings.Contains(req.Context, "Miso") {
		t.Errorf("request Memory %v, Notes %+v, context %q", req.Memory, req.Notes, req.Context)
	}
	if slices.ContainsFunc(Commands(k.brain, false), func(c message.Command) bool { return c.Name == "memory" }) {
		t.Error("/memory registered")
	}
	k.serve(k.private("/memory"))
	if out := k.ev.Of("out"); !strings.Contains(out[len(out)-1], "I don't know that command") {
		t.Errorf("/memory answered %q", out[len(out)-1])
	}
}

// /memory lists the notes under a button each and one for all; the
// user's tap drops one, then all, and says so under the list; another
// user's tap, or a second tap, drops nothing.
func TestMemoryCommand(t *testing.T) {
	k := newKit(t, memoryBrain)
	if !slices.ContainsFunc(Commands(k.brain, false), func(c message.Command) bool { return c.Name == "memory" }) {
		t.Error("/memory not registered")
	}
	k.serve(k.private("/memory"))
	k.want("out", fmt.Sprintf("text %q formatted=false", MemoryEmpty))

	k.note(kitUser, "Has a cat named Miso")
	k.note(kitUser, "Learns Portuguese")
	k.serve(k.private("/memory"))
	list := MemoryHeading + "\n1. Has a cat named Miso\n2. Learns Portuguese\n\n" + MemoryHint
	out := k.ev.Of("out")
	if got := out[len(out)-2:]; !slices.Equal(got, []string{fmt.Sprintf("attach %q", []string{"🗑 1", "🗑 2", MemoryDropAllLabel}),
		fmt.Sprintf("text %q formatted=true", list)}) {
		t.Fatalf("/memory answered %q", got)
	}
	msg, buttons := k.chats.newestSent(), k.chats.buttons
	other := k.privateTap(msg, buttons[0])
	other.Sender = 8
	if _, _, notice := k.tap(other); notice != NoticeNotTheirs {
		t.Errorf("another user's tap answered %q", notice)
	}
	if _, _, notice := k.tap(k.privateTap(msg, buttons[0])); notice != NoticeNoteDropped {
		t.Errorf("the tap on 🗑 1 answered %q", notice)
	}
	if out := k.ev.Of("out"); out[len(out)-1] != fmt.Sprintf("amend %d %q", msg, fmt.Sprintf(MemoryDroppedOne, 1)) {
		t.Errorf("after the tap: %q", out[len(out)-1])
	}
	if _, _, notice := k.tap(k.privateTap(msg, buttons[2])); notice != NoticeForgetFired {
		t.Errorf("a second tap under the list answered %q", notice)
	}
	statetest.WantNotes(t, k.store, kitBot, kitUser, "Learns Portuguese")

	k.serve(k.private("/memory"))
	msg, buttons = k.chats.newestSent(), k.chats.buttons[len(k.chats.buttons)-2:]
	if _, _, notice := k.tap(k.privateTap(msg, buttons[1])); notice != NoticeNotesDropped {
		t.Errorf("the tap on drop all answered %q", notice)
	}
	if out := k.ev.Of("out"); out[len(out)-1] != fmt.Sprintf("amend %d %q", msg, MemoryDroppedAll) {
		t.Errorf("after drop all: %q", out[len(out)-1])
	}
	statetest.WantNotes(t, k.store, kitBot, kitUser)
}

// In a group /memory says where it works, and shows nothing.
func TestMemoryCommandInGroup(t *testing.T) {
	k := newKit(t, memoryBrain+"  groups: true\n")
	k.note(kitUser, "Has a cat named Miso")
	k.serve(k.inGroup(kitUser, "Ann", "/memory"))
	k.want("out", fmt.Sprintf("text %q formatted=false", MemoryInGroup))
	if len(k.chats.buttons) != 0 {
		t.Errorf("buttons %q", k.chats.buttons)
	}
}

// /forget deletes the notes, and its log line counts them.
func TestForgetDropsTheNotes(t *testing.T) {
	k := newKit(t, memoryBrain)
	k.note(kitUser, "Has a cat named Miso")
	k.note(kitUser, "Learns Portuguese")
	if _, err := k.p.Forget(context.Background(), kitBot, kitUser, "user"); err != nil {
		t.Fatal(err)
	}
	statetest.WantNotes(t, k.store, kitBot, kitUser)
	if l := k.logs.FilterMessage("user forgotten").All(); len(l) != 1 || l[0].ContextMap()["notes"] != int64(2) {
		t.Errorf("logged %v", l)
	}
}
