package bot

import (
	"fmt"
	"strings"
	"testing"

	"brainbot/bot/conversation"
	"brainbot/bot/telegramtest"
)

// The senders of the test group's updates, as Telegram writes them: a
// member, and the group's anonymous admins (from GroupAnonymousBot, on
// behalf of the group).
const (
	memberBo  = `"from":{"id":8,"is_bot":false,"first_name":"Bo"}`
	adminCy   = `"from":{"id":9,"is_bot":false,"first_name":"Cy"}`
	groupJSON = `{"id":-1001500,"type":"supergroup","title":"Friends"}`
	asGroup   = `"from":{"id":1087968824,"is_bot":true,"first_name":"Group","username":"GroupAnonymousBot"},"sender_chat":` + groupJSON
)

// sendGroup sends text written in the test group by sender (one of the
// above), a bot_command entity over a leading /command, as Telegram does.
func (h *harness) sendGroup(sender, text string) {
	entities := ""
	if strings.HasPrefix(text, "/") {
		cmd, _, _ := strings.Cut(text, " ")
		entities = fmt.Sprintf(`,"entities":[{"type":"bot_command","offset":0,"length":%d}]`, len(cmd))
	}
	h.srv.SendUpdate(tokenA, fmt.Appendf(nil, `{"update_id":1,"message":{"message_id":%d,"date":1763888000,"chat":%s,%s,"text":%q%s}}`,
		messageIDs.Add(1), groupJSON, sender, text, entities))
}

// stopInGroup sends /stop from sender and returns the bot's answer.
func (h *harness) stopInGroup(sender string) telegramtest.Call {
	h.t.Helper()
	before := len(h.srv.Sent(tokenA))
	h.sendGroup(sender, "/stop")
	return h.waitSent(tokenA, before+1)[before]
}

// In a group /stop stops only its sender's own answer: another member's
// is answered with a notice only they see, and the answer runs on; an
// admin of the group, as Telegram says, stops it.
func TestGroupStopIsTheAskersOrAnAdmins(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "groups: all\n")}, nil)
	h.srv.Promote(tokenA, groupChat, 9)
	h.srv.SendMessage(tokenA, groupMessage(7, "#wait a long answer", false))
	h.claude.waitCalls(t, 1)
	got := h.stopInGroup(memberBo)
	if got.Param("text") != conversation.NoticeNotYours || !strings.Contains(got.Param("ephemeral_message_parameters"), `"receiver_user_id":8`) {
		t.Fatalf("a member's /stop of another's answer = %q %v", got.Param("text"), got.Params)
	}
	// Still running: the admin's /stop finds it.
	if got := h.stopInGroup(adminCy); got.Param("text") != "Stopped. What next?" {
		t.Fatalf("an admin's /stop = %q", got.Param("text"))
	}
	if e := h.waitLog("turn stopped by /stop"); e.ContextMap()["user"] != int64(9) {
		t.Errorf("stopped by %v, want the admin", e.ContextMap()["user"])
	}
	var asked int
	for _, c := range h.srv.Calls(tokenA) {
		if c.Method == "getChatMember" {
			asked++
		}
	}
	if asked != 2 {
		t.Errorf("Telegram asked %d times who is an admin, want once for each of the two who did not ask", asked)
	}
}

// The group's anonymous admins, who write as the group, stop any answer
// with /stop, as an admin may.
func TestGroupStopByTheAnonymousAdmins(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "groups: all\n")}, nil)
	h.srv.SendMessage(tokenA, groupMessage(7, "#wait a long answer", false))
	h.claude.waitCalls(t, 1)
	if got := h.stopInGroup(asGroup); got.Param("text") != "Stopped. What next?" {
		t.Fatalf("the anonymous admins' /stop = %q", got.Param("text"))
	}
}

// The group's anonymous admins ask as the group but tap as themselves:
// ⏹ under the group's answer stops it for an admin of the group, as
// Telegram says, and for nobody else.
func TestGroupStopButtonForTheAnonymousAdmins(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "groups: all\n")}, nil)
	h.srv.Promote(tokenA, groupChat, 9)
	h.sendGroup(asGroup, "#stopme tell me more")
	streamed, err := h.srv.WaitCall(h.ctx(), tokenA, func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.ChatID() == groupChat && c.MessageID != 0 && len(c.Buttons()) == 1
	})
	if err != nil {
		t.Fatalf("no streamed answer with ⏹: %v", err)
	}
	data := streamed.Buttons()[0][0].Data
	tap := func(user int64) string {
		_, query := h.srv.Tap(tokenA, user, groupChat, streamed.MessageID, data)
		answer, err := h.srv.WaitAnswer(h.ctx(), tokenA, query)
		if err != nil {
			t.Fatalf("tap by %d not answered: %v", user, err)
		}
		return answer.Param("text")
	}
	if got := tap(8); got != conversation.NoticeNotYours {
		t.Errorf("a member's ⏹ on the group's answer = %q, want %q", got, conversation.NoticeNotYours)
	}
	if got := tap(9); got != conversation.NoticeStopped {
		t.Errorf("an admin's ⏹ on the group's answer = %q, want %q", got, conversation.NoticeStopped)
	}
}
