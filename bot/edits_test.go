package bot

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
)

// sendAs queues a private message of user 7 with message id id, as
// Telegram sends it.
func sendAs(h *harness, id int, text string) {
	h.srv.SendMessage(tokenA, map[string]any{"message_id": id, "date": time.Now().Unix(),
		"chat": map[string]any{"id": 7, "type": "private", "first_name": "Ann"},
		"from": map[string]any{"id": 7, "is_bot": false, "first_name": "Ann"}, "text": text})
}

// editAs queues the edit of message id, as Telegram sends it.
func editAs(h *harness, id int, text string) {
	h.srv.SendEdit(tokenA, map[string]any{"message_id": id, "date": time.Now().Unix() - 5,
		"chat": map[string]any{"id": 7, "type": "private", "first_name": "Ann"},
		"from": map[string]any{"id": 7, "is_bot": false, "first_name": "Ann"}, "text": text})
}

// An edited message is answered as edited, once: still waiting, in its
// place; being answered, its turn is stopped, nothing of it is sent, and
// the edited version is answered. An edit after the answer, or of a
// message never seen, is not answered. Alone and in a cluster.
func TestEditsAreAnsweredAsEdited(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			h := newHarnessWith(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil, func(h *harness) { m.setup(t, h) })

			// Being answered: stopped, and the edit answered instead.
			sendAs(h, 101, "#wait slow hte")
			h.claude.waitCalls(t, 1)
			editAs(h, 101, "fixed the typo")
			h.waitLog("turn stopped: its message was edited")
			// Waiting: the edit takes its place.
			if got := h.waitSent(tokenA, 1)[0]; got.Param("text") != "You said: fixed the typo" {
				t.Fatalf("first reply %q, want the edited message's", got.Param("text"))
			}
			// After the answer (its line written): not answered again.
			waitSummaries(t, h.logs, 3) // the stop, the old version, the edited one
			editAs(h, 101, "fixed the typo, twice")
			h.waitLog("edited message not answered again: answered already, or never seen")
			// Never seen: the same.
			editAs(h, 999, "what?")
			if got := h.exchange(tokenA, 7, "probe"); got.Param("text") != "You said: probe" {
				t.Fatalf("after the late edits: %q, want the probe's answer", got.Param("text"))
			}
			var prompts []string
			for _, r := range h.claude.requests() {
				prompts = append(prompts, r.Prompt)
			}
			if want := []string{"#wait slow hte", "fixed the typo", "probe"}; strings.Join(prompts, "|") != strings.Join(want, "|") {
				t.Errorf("the model was asked %q, want %q", prompts, want)
			}
			var outcomes []string
			for _, e := range waitSummaries(t, h.logs, 4) {
				outcomes = append(outcomes, e.ContextMap()["outcome"].(string))
			}
			if !strings.Contains(strings.Join(outcomes, ","), "edited") {
				t.Errorf("outcomes %v: want the old version's as edited", outcomes)
			}
			if n := len(h.srv.Sent(tokenA)); n != 2 {
				t.Errorf("%d messages sent, want 2: %s", n, describeCalls(h.srv.Sent(tokenA)))
			}
		})
	}
}

// An edit of a message still waiting behind another takes its place.
func TestEditOfAWaitingMessage(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	sendAs(h, 201, "#wait first")
	h.claude.waitCalls(t, 1)
	sendAs(h, 202, "secnod")
	editAs(h, 202, "second")
	h.waitLog("edited message answered as edited: it was still waiting")
	close(h.claude.release)
	wantSent(t, h, "7:You said: #wait first", "7:You said: second")
	if got := h.claude.requests(); len(got) != 2 || got[1].Prompt != "second" {
		t.Errorf("the model was asked %d times, the second %q; want the edited text once", len(got), got[len(got)-1].Prompt)
	}
}

// In a group the answer streams as a message of its own: when its
// question is edited while it is written, that message is taken back
// (deleteMessage), so the group sees only the edited version's answer.
func TestAGroupAnswerOfAnEditedMessageIsTakenBack(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	asked := groupMessage(9, "#stopme tell me a stroy", true)
	asked["message_id"] = 301
	h.srv.SendMessage(tokenA, asked)
	streamed, err := h.srv.WaitCall(h.ctx(), tokenA, func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.ChatID() == groupChat
	})
	if err != nil {
		t.Fatalf("the answer did not stream: %v", err)
	}
	edited := groupMessage(9, "tell me a story", true)
	edited["message_id"] = 301
	h.srv.SendEdit(tokenA, edited)
	h.waitLog("turn stopped: its message was edited")
	answer := h.waitSent(tokenA, 2)[1]
	if answer.ChatID() != groupChat || answer.Param("text") != "You said: Ann Lee: tell me a story" {
		t.Fatalf("then sent %d %q, want the edited version's answer in the group", answer.ChatID(), answer.Param("text"))
	}
	if _, shown := h.srv.Message(tokenA, groupChat, streamed.MessageID); shown {
		t.Errorf("the old version's streamed answer (message %d) is still in the group", streamed.MessageID)
	}
	deleted := h.srv.Sent(tokenA, "deleteMessage")
	if len(deleted) != 1 || deleted[0].Param("message_id") != fmt.Sprint(streamed.MessageID) || deleted[0].Code != 200 {
		t.Errorf("deleteMessage calls %s, want one of message %d", describeCalls(deleted), streamed.MessageID)
	}
}
