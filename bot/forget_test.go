package bot

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/bot/intake"
	"brainbot/bot/telegramtest"
	"brainbot/message"
)

// An admin's forget drops the messages the user sent that wait behind
// the one being answered: /forget promises that messages not answered
// yet go, and they must never reach the model (they were answered after
// the forget, in a new conversation). The admin learns how many went.
func TestForgetDropsTheMessagesWaiting(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	h.srv.SendText(tokenA, 7, 7, "#wait first")
	h.claude.waitCalls(t, 1)
	h.srv.SendText(tokenA, 7, 7, "my secret")
	h.srv.SendText(tokenA, 7, 7, "another secret")
	h.srv.SendText(tokenA, 8, 8, "#wait someone else")
	waitFor(t, func() bool { return h.m.intake.Backlog("alpha").Waiting == 2 && len(h.claude.requests()) == 2 })
	h.srv.SendText(tokenA, 8, 8, "their next")
	waitFor(t, func() bool { return h.m.intake.Backlog("alpha").Waiting == 3 })

	if _, err := h.m.Forget(h.ctx(), "alpha", 7); err != nil {
		t.Fatal(err)
	}
	if got := h.waitLog("user forgotten").ContextMap()["unanswered"]; got != int64(2) {
		t.Errorf("the forget logged %v messages dropped unanswered, want 2", got)
	}
	close(h.claude.release)
	waitSummaries(t, h.logs, 3)
	var prompts []string
	for _, r := range h.claude.requests() {
		prompts = append(prompts, r.Prompt)
	}
	if slices.ContainsFunc(prompts, func(p string) bool { return strings.Contains(p, "secret") }) {
		t.Errorf("the model got a forgotten user's waiting messages: %q", prompts)
	}
	if !slices.ContainsFunc(prompts, func(p string) bool { return strings.Contains(p, "their next") }) {
		t.Errorf("another user's waiting message was not answered: %q", prompts)
	}
	// Done with, not handed back: a restart answers none of them.
	waitEmptyJournal(t, h.store)
}

// An admin's forget while the user's answer is being written stops that
// answer and keeps nothing of it: no reply, and no session or transcript
// stored after the forget deleted them (it came back when the answer
// finished and stored its turn).
func TestForgetDuringAnAnswerKeepsNothingOfIt(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	h.exchange(tokenA, 7, "hello")
	h.srv.SendText(tokenA, 7, 7, "#wait tell me a secret")
	h.claude.waitCalls(t, 2)
	if _, err := h.m.Forget(h.ctx(), "alpha", 7); err != nil {
		t.Fatal(err)
	}
	close(h.claude.release) // an answer the forget did not stop finishes now
	summaries := waitSummaries(t, h.logs, 2)
	if got := summaries[1].ContextMap()["outcome"]; got != "forgotten" {
		t.Errorf("the answer being written ended %v, want forgotten", got)
	}
	for _, c := range h.srv.Sent(tokenA) {
		if strings.Contains(c.Param("text"), "secret") {
			t.Errorf("the forgotten user got the answer: %q", c.Param("text"))
		}
	}
	if s, ok, err := h.store.Session(h.ctx(), message.Key{Bot: "alpha", Chat: 7}); ok || err != nil {
		t.Errorf("after the forget the store has the user's session %+v (%v)", s, err)
	}
}

// A forget done through another instance of a cluster reaches this one a
// moment after the store deleted the user: an answer that stored its
// session in between (here: the reply on its way to Telegram) had it
// back, so the forget deletes it once more when it finds that answer.
func TestAForgetHeardLateDeletesWhatTheAnswerStoredMeanwhile(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	h.srv.SendText(tokenA, 7, 7, "#wait remember this")
	h.claude.waitCalls(t, 1)
	forgot, err := h.store.ForgetUser(h.ctx(), "alpha", 7) // the other instance's forget
	if err != nil {
		t.Fatal(err)
	}
	release := h.srv.Hold(tokenA, "sendMessage")
	defer release()
	close(h.claude.release)
	if _, err := h.srv.WaitCall(h.ctx(), tokenA, func(c telegramtest.Call) bool { return c.Method == "sendMessage" }); err != nil {
		t.Fatal(err)
	}
	key := message.Key{Bot: "alpha", Chat: 7}
	if _, ok, _ := h.store.Session(h.ctx(), key); !ok {
		t.Fatal("the answer did not store its session before its reply: the case proves nothing")
	}
	h.m.pipeline.ForgetHere(h.ctx(), forgot) // heard here now
	if s, ok, err := h.store.Session(h.ctx(), key); ok || err != nil {
		t.Errorf("after the forget was heard the store has the user's session %+v (%v)", s, err)
	}
}

// A forget drops the photos of an album still arriving too (an album
// waits a second after its last photo before it is answered): they never
// reach the model, and the admin sees them waiting, then counted.
func TestForgetDropsAnAlbumStillArriving(t *testing.T) {
	h := newMediaHarness(t, "", nil)
	for i := range 2 {
		img := jpegOf(t, 10+i, 10)
		caption := ""
		if i == 0 {
			caption = `,"caption":"our secret trip"`
		}
		h.send(7, fmt.Sprintf(`"media_group_id":"13919228427634191","photo":[{"file_id":%q,"file_unique_id":"s%d","width":%d,"height":10,"file_size":%d}]%s`,
			h.srv.AddFile(tokenA, img), i, 10+i, len(img), caption))
	}
	waitFor(t, func() bool { return h.m.intake.Backlog("alpha").Gathering == 2 })

	if _, err := h.m.Forget(h.ctx(), "alpha", 7); err != nil {
		t.Fatal(err)
	}
	if got := h.waitLog("user forgotten").ContextMap()["unanswered"]; got != int64(2) {
		t.Errorf("the forget logged %v messages dropped unanswered, want 2", got)
	}
	if b := h.m.intake.Backlog("alpha"); b.Gathering != 0 {
		t.Errorf("after the forget the backlog is %+v, want no album gathering", b)
	}
	h.srv.SendText(tokenA, 7, 7, "probe") // would follow the album, had it gone on
	sent := h.waitSent(tokenA, 1)
	time.Sleep(intake.AlbumWait + 200*time.Millisecond) // the album's timer, had it run
	for _, r := range h.claude.requests() {
		if strings.Contains(r.Prompt, "secret") || len(r.Attachments) > 0 {
			t.Errorf("the model got the forgotten album: %q with %d files", r.Prompt, len(r.Attachments))
		}
	}
	if n := len(h.srv.Sent(tokenA)); n != 1 || sent[0].Param("text") != "You said: probe" {
		t.Errorf("replies %s, want only the probe's", describeCalls(h.srv.Sent(tokenA)))
	}
	// Done with, not handed back: a restart answers none of them.
	waitEmptyJournal(t, h.store)
}
