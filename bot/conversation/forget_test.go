package conversation

// /forget at the ports: what the user is told, what a tap deletes from
// the real store and beside it, and what it keeps.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"brainbot/claude"
	"brainbot/message"
	"brainbot/state"
)

// privateTap is kitUser's tap on the button with data under message
// messageID of their private chat.
func (k *kit) privateTap(messageID int, data string) *message.Inbound {
	in := k.private("")
	in.Kind, in.MessageID = message.Tapped, messageID
	in.Tap = message.Tap{QueryID: fmt.Sprintf("query-%d", in.ID), Data: data}
	return in
}

// keep writes a file of kitUser's at rel below the kit's data folder.
func (k *kit) keep(rel string) string {
	k.t.Helper()
	path := filepath.Join(k.data, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		k.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("kept"), 0o640); err != nil {
		k.t.Fatal(err)
	}
	return path
}

// /forget says what goes, under a confirm and a cancel button; the
// confirm tap deletes the conversation, its transcript, the user's files
// and their /voice choice, ends the warm CLI and says it is done; usage
// stays, without the user's id. The next message starts a new session.
func TestForget(t *testing.T) {
	k := newKit(t, "tts:\n  user_toggle: true\n")
	ctx := context.Background()
	key := message.Key{Bot: kitBot, Chat: kitUser}
	k.serve(k.private("hello"))
	transcript := k.keep(filepath.Join("transcripts", kitBot, "session-1.jsonl"))
	voice := k.keep("audio-output/bot-alpha/user-7/note.mp3")
	other := k.keep("audio-output/bot-alpha/user-8/note.mp3")
	if err := k.store.SetVoice(ctx, kitBot, kitUser, true); err != nil {
		t.Fatal(err)
	}
	before := k.usage()

	k.serve(k.private("/forget"))
	out := k.ev.Of("out")
	if got := out[len(out)-2:]; !slices.Equal(got, []string{fmt.Sprintf("attach %q", []string{ForgetLabel, ForgetCancelLabel}),
		fmt.Sprintf("text %q formatted=true", ForgetOffer)}) {
		t.Fatalf("/forget answered %q", got)
	}
	offer, confirm := k.chats.newestSent(), k.chats.buttons[0]
	if _, chosen, notice := k.tap(k.privateTap(offer, confirm)); chosen || notice != NoticeForgetting {
		t.Errorf("the confirm tap: chosen %v, answered %q", chosen, notice)
	}
	out = k.ev.Of("out")
	if got := out[len(out)-2:]; !slices.Equal(got, []string{fmt.Sprintf("drop buttons %d", offer), fmt.Sprintf("text %q formatted=false", ForgetDone)}) {
		t.Errorf("after the tap: %q", got)
	}
	if !slices.Contains(k.ev.Of("agent"), "end "+key.String()) {
		t.Errorf("the warm CLI was not ended: %q", k.ev.Of("agent"))
	}
	if _, ok, _ := k.store.Session(ctx, key); ok {
		t.Error("the session was kept")
	}
	for _, gone := range []string{transcript, voice} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s was kept: %v", gone, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another user's file went: %v", err)
	}
	if _, set, _ := k.store.Voice(ctx, kitBot, kitUser); set {
		t.Error("the /voice choice was kept")
	}
	if after := k.usage(); sumUSD(after) != sumUSD(before) || slices.ContainsFunc(after, func(u state.UsageLine) bool { return u.User == kitUser }) {
		t.Errorf("usage %+v, was %+v: want the same cost, without the user", after, before)
	}
	logged := k.logs.FilterMessage("user forgotten").All()
	if len(logged) != 1 || logged[0].ContextMap()["transcripts"] != int64(1) || logged[0].ContextMap()["files"] != int64(1) ||
		logged[0].ContextMap()["by"] != "user" {
		t.Errorf("logged %+v, want one line with the counts", logged)
	}

	if _, _, notice := k.tap(k.privateTap(offer, confirm)); notice != NoticeGone {
		t.Errorf("a second tap answered %q", notice)
	}
	k.serve(k.private("hello again"))
	if reqs := k.agent.requests(); reqs[len(reqs)-1].SessionID != "" || reqs[len(reqs)-1].Resume {
		t.Errorf("the next message resumed %+v", reqs[len(reqs)-1])
	}
}

// newestSent is the id of the last message the chats sent.
func (c *fakeChats) newestSent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nextID
}

func sumUSD(lines []state.UsageLine) (usd float64) {
	for _, l := range lines {
		usd += l.ClaudeUSD
	}
	return usd
}

// Cancel keeps everything and says so under the question; an expired
// question does nothing.
func TestForgetCancelledOrExpired(t *testing.T) {
	now := time.Now()
	k := newKit(t, "", func(c *Config) { c.Now = func() time.Time { return now } })
	k.serve(k.private("hello"))
	k.serve(k.private("/forget"))
	offer, cancel := k.chats.newestSent(), k.chats.buttons[1]
	if _, _, notice := k.tap(k.privateTap(offer, cancel)); notice != NoticeCancelled {
		t.Errorf("cancel answered %q", notice)
	}
	if out := k.ev.Of("out"); out[len(out)-1] != fmt.Sprintf("amend %d %q", offer, ForgetCancelled) {
		t.Errorf("after cancel: %q", out[len(out)-1])
	}
	k.serve(k.private("/forget"))
	offer, confirm := k.chats.newestSent(), k.chats.buttons[2]
	now = now.Add(k.brain.Buttons.MaxAge.D() + time.Minute)
	if _, _, notice := k.tap(k.privateTap(offer, confirm)); notice != NoticeExpired {
		t.Errorf("an expired confirm answered %q", notice)
	}
	if _, ok, _ := k.store.Session(context.Background(), message.Key{Bot: kitBot, Chat: kitUser}); !ok {
		t.Error("the session went")
	}
	if n := k.logs.FilterMessage("user forgotten").Len(); n != 0 {
		t.Errorf("%d forgets logged", n)
	}
}

// In a group /forget says where it works, and offers nothing.
func TestForgetInGroup(t *testing.T) {
	k := newKit(t, "")
	k.serve(k.inGroup(kitUser, "Ann", "/forget"))
	k.want("out", fmt.Sprintf("text %q formatted=false", ForgetInGroup))
	if len(k.chats.buttons) != 0 || k.logs.FilterMessage("user forgotten").Len() != 0 {
		t.Errorf("buttons %q, logs %v", k.chats.buttons, k.logs.All())
	}
}

// An admin's forget of a user with every bot goes through the same
// procedure, logged as theirs, and drops the user's messages still
// waiting in the queues.
func TestForgetByAdmin(t *testing.T) {
	k := newKit(t, "")
	k.serve(k.private("hello"))
	k.queues.waiting = map[int64]int{kitUser: 2}
	f, err := k.p.Forget(context.Background(), "", kitUser, "admin")
	if err != nil || !slices.Equal(f.Conversations, []message.Key{{Bot: kitBot, Chat: kitUser}}) || !slices.Equal(f.Sessions, []string{"session-1"}) {
		t.Errorf("forgot %+v, %v", f, err)
	}
	if l := k.logs.FilterMessage("user forgotten").FilterField(zap.String("by", "admin")).FilterField(zap.Int("unanswered", 2)).Len(); l != 1 {
		t.Errorf("%d admin forgets logged with the 2 waiting messages unanswered", l)
	}
}

// A confirm tapped while an answer is being written waits for it: the
// answer would keep the session it ends.
func TestForgetWaitsForTheAnswer(t *testing.T) {
	k := newKit(t, "")
	k.serve(k.private("/forget"))
	offer, confirm := k.chats.newestSent(), k.chats.buttons[0]
	started, release := make(chan struct{}), make(chan struct{})
	k.agent.answer = func(ctx context.Context, req claude.Request) (*claude.Result, error) {
		close(started)
		<-release
		return &claude.Result{Text: "Hello, Ann.", Answered: true, SessionID: "session-1"}, nil
	}
	done := make(chan struct{})
	go func() { defer close(done); k.serve(k.private("hello")) }()
	<-started
	_, _, notice := k.tap(k.privateTap(offer, confirm))
	close(release)
	<-done
	if notice != NoticeForgetBusy {
		t.Errorf("a confirm during an answer answered %q", notice)
	}
	if _, _, notice := k.tap(k.privateTap(offer, confirm)); notice != NoticeForgetting {
		t.Errorf("the confirm after the answer answered %q", notice)
	}
	if _, ok, _ := k.store.Session(context.Background(), message.Key{Bot: kitBot, Chat: kitUser}); ok {
		t.Error("the session was kept")
	}
}
