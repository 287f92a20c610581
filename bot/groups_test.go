package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"brainbot/bot/telegramtest"
	"brainbot/message"
)

const groupChat = -1001500

// groupMessage is a message from user in the test group, as Telegram sends
// it; with mention, text starts with the bot's @username as a mention
// entity.
func groupMessage(user int64, text string, mention bool) map[string]any {
	msg := map[string]any{
		"date": 1763888000,
		"chat": map[string]any{"id": groupChat, "type": "supergroup", "title": "Friends"},
		"from": map[string]any{"id": user, "is_bot": false, "first_name": "Ann", "last_name": "Lee"},
		"text": text,
	}
	if mention {
		name := "@" + telegramtest.Username(tokenA)
		msg["text"] = name + " " + text
		msg["entities"] = []map[string]any{{"type": "mention", "offset": 0, "length": len(utf16.Encode([]rune(name)))}}
	}
	return msg
}

func TestGroupConversations(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	// Unaddressed chatter: no reply and no model call; the mention after
	// it shows it was read.
	h.srv.SendMessage(tokenA, groupMessage(7, "anyone up for lunch?", false))
	h.srv.SendMessage(tokenA, groupMessage(7, "what is 2+2?", true))
	got := h.waitSent(tokenA, 1)[0]
	if got.ChatID() != groupChat || got.Param("text") != "You said: Ann Lee: what is 2+2?" {
		t.Fatalf("reply to a mention = %d %q", got.ChatID(), got.Param("text"))
	}
	var reply struct {
		MessageID int `json:"message_id"`
	}
	if err := json.Unmarshal([]byte(got.Param("reply_parameters")), &reply); err != nil || reply.MessageID == 0 {
		t.Errorf("reply_parameters = %q, want a reply to the mention", got.Param("reply_parameters"))
	}
	if reqs := h.claude.requests(); len(reqs) != 1 || reqs[0].Prompt != "Ann Lee: what is 2+2?" {
		t.Fatalf("model saw %+v, want only the mention, with the sender's name and without the @mention", reqs)
	}

	// A reply to one of the bot's messages is addressed to it.
	msg := groupMessage(8, "and 3+3?", false)
	msg["reply_to_message"] = map[string]any{"message_id": 1, "date": 1, "chat": msg["chat"],
		"from": map[string]any{"id": telegramtest.BotID(tokenA), "is_bot": true, "first_name": "Test bot"}, "text": "You said..."}
	h.srv.SendMessage(tokenA, msg)
	if got := h.waitSent(tokenA, 2)[1]; got.Param("text") != "You said: Ann Lee: and 3+3?" {
		t.Fatalf("reply to a reply = %q", got.Param("text"))
	}

	// The group is one conversation, separate from user 7's private one.
	h.exchange(tokenA, 7, "private hello")
	ctx := context.Background()
	group, _, _ := h.store.Session(ctx, message.Key{Bot: "alpha", Chat: groupChat})
	private, _, _ := h.store.Session(ctx, message.Key{Bot: "alpha", Chat: 7})
	if group.ID == "" || private.ID == "" || group.ID == private.ID {
		t.Fatalf("group session %q, private session %q: want two", group.ID, private.ID)
	}
	reqs := h.claude.requests()
	if !reqs[1].Resume || reqs[1].SessionID != group.ID || reqs[2].Resume {
		t.Errorf("the group's second message must resume the group's session and the private one start its own: %+v", reqs)
	}

	// /reset in the group ends the group's conversation only.
	h.srv.SendMessage(tokenA, withCommand(groupMessage(7, "/reset", false)))
	h.waitSent(tokenA, 4)
	if _, ok, _ := h.store.Session(ctx, message.Key{Bot: "alpha", Chat: groupChat}); ok {
		t.Error("group session kept after /reset in the group")
	}
	if s, ok, _ := h.store.Session(ctx, message.Key{Bot: "alpha", Chat: 7}); !ok || s.ID != private.ID {
		t.Error("/reset in the group ended the private conversation")
	}
	// A command for another bot is not for this one.
	h.srv.SendMessage(tokenA, withCommand(groupMessage(7, "/help@other_bot", false)))
	h.srv.SendMessage(tokenA, withCommand(groupMessage(7, "/help", false)))
	if got := h.waitSent(tokenA, 5)[4]; !strings.Contains(got.Param("text"), "Commands:") {
		t.Fatalf("after /help@other_bot and /help: %q", got.Param("text"))
	}
	if n := len(h.claude.requests()); n != 3 {
		t.Errorf("%d model calls, want 3", n)
	}
}

func withCommand(msg map[string]any) map[string]any {
	cmd, _, _ := strings.Cut(msg["text"].(string), " ")
	msg["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len(utf16.Encode([]rune(cmd)))}}
	return msg
}

// In a forum supergroup each topic is a conversation, and replies stay in
// their topic.
func TestForumTopicsAreConversations(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	inTopic := func(topic int, text string) {
		msg := groupMessage(7, text, true)
		msg["message_thread_id"], msg["is_topic_message"] = topic, true
		h.srv.SendMessage(tokenA, msg)
	}
	inTopic(42, "first topic")
	if got := h.waitSent(tokenA, 1)[0]; got.Param("message_thread_id") != "42" {
		t.Fatalf("reply in topic 42 has message_thread_id %q", got.Param("message_thread_id"))
	}
	inTopic(43, "second topic")
	h.waitSent(tokenA, 2)
	a, _, _ := h.store.Session(context.Background(), message.Key{Bot: "alpha", Chat: groupChat, Thread: 42})
	b, _, _ := h.store.Session(context.Background(), message.Key{Bot: "alpha", Chat: groupChat, Thread: 43})
	if a.ID == "" || a.ID == b.ID {
		t.Fatalf("topics share session %q / %q", a.ID, b.ID)
	}
}

// anonymousAdmin is the user id Telegram puts in from.id of messages that
// group admins post anonymously (GroupAnonymousBot); sender_chat is set.
const anonymousAdmin = 1087968824

// groups: off answers nothing in groups; groups: all answers everything.
// Anonymous admins appear under the title they post as.
func TestGroupsSetting(t *testing.T) {
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, "groups: off\n"),
		"beta":  brainFile(tokenB, "groups: all\n"),
	}, nil)
	h.srv.SendMessage(tokenA, groupMessage(7, "hello?", true))
	anon := groupMessage(anonymousAdmin, "news for everyone", false)
	anon["sender_chat"] = map[string]any{"id": groupChat, "type": "supergroup", "title": "Friends"}
	h.srv.SendMessage(tokenB, anon)
	if got := h.waitSent(tokenB, 1)[0]; got.Param("text") != "You said: Friends: news for everyone" {
		t.Fatalf("groups: all, anonymous admin: %q", got.Param("text"))
	}
	if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
		t.Fatal(err)
	}
	if sent := h.srv.Sent(tokenA); len(sent) != 0 {
		t.Fatalf("groups: off answered %s", describeCalls(sent))
	}
}

// Joins and leaves are logged; edits and channel posts get no answer.
func TestUpdatesThatNeedNoAnswer(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, nil)
	bot := map[string]any{"id": telegramtest.BotID(tokenA), "is_bot": true, "first_name": "Test bot"}
	added, _ := json.Marshal(map[string]any{"my_chat_member": map[string]any{
		"chat": map[string]any{"id": groupChat, "type": "supergroup", "title": "Friends"},
		"from": map[string]any{"id": 7, "is_bot": false, "first_name": "Ann"}, "date": 1,
		"old_chat_member": map[string]any{"status": "left", "user": bot},
		"new_chat_member": map[string]any{"status": "member", "user": bot},
	}})
	h.srv.SendUpdate(tokenA, added)
	h.srv.SendEdit(tokenA, groupMessage(7, "edited", true))
	post, _ := json.Marshal(map[string]any{"channel_post": map[string]any{"message_id": 3, "date": 1,
		"chat": map[string]any{"id": -1009, "type": "channel", "title": "News"}, "text": "@" + telegramtest.Username(tokenA)}})
	h.srv.SendUpdate(tokenA, post)
	e := h.waitLog("bot added to a chat")
	if e.ContextMap()["chat"] != int64(groupChat) || e.Level.String() != "info" {
		t.Errorf("join log = %v %v", e.Level, e.ContextMap())
	}
	h.exchange(tokenA, 7, "probe")
	if sent := h.srv.Sent(tokenA); len(sent) != 1 {
		t.Fatalf("answered %s, want only the probe", describeCalls(sent))
	}
}

// Telegram sends an anonymous admin's messages from GroupAnonymousBot with
// sender_chat set to the group (and a channel's posts in its linked group
// with sender_chat the channel). Such a sender is its chat: the anonymous
// admins of two groups each have their own daily allowance and /voice
// setting, and access.allowed_users names them by the chat's id.
func TestAnonymousAdminsOfTwoGroupsAreTwoSenders(t *testing.T) {
	h := newHarness(t, map[string]string{
		"alpha": brainFile(tokenA, "groups: all\nlimits:\n  per_user_per_day: 1\nmessages:\n  limit: Enough for today.\ntts:\n  enabled: false\n  user_toggle: true\n"),
		"beta":  brainFile(tokenB, "groups: all\naccess:\n  allowed_users: [-1001500]\nmessages:\n  denied: Private bot.\n"),
	}, nil)
	groups := map[int64]string{-1001500: "Friends", -1002600: "Neighbours"}
	// ask sends text as the anonymous admin of group, as Telegram does, and
	// returns the bot's answer.
	ask := func(token string, group int64, text string) telegramtest.Call {
		t.Helper()
		chat := fmt.Sprintf(`{"id":%d,"type":"supergroup","title":%q}`, group, groups[group])
		entities := ""
		if strings.HasPrefix(text, "/") {
			entities = fmt.Sprintf(`,"entities":[{"type":"bot_command","offset":0,"length":%d}]`, len(text))
		}
		before := len(h.srv.Sent(token))
		h.srv.SendUpdate(token, fmt.Appendf(nil, `{"update_id":1,"message":{"message_id":%d,"date":1763888000,"chat":%s,`+
			`"from":{"id":%d,"is_bot":true,"first_name":"Group","username":"GroupAnonymousBot"},"sender_chat":%s,"text":%q%s}}`,
			messageIDs.Add(1), chat, anonymousAdmin, chat, text, entities))
		return h.waitSent(token, before+1)[before]
	}
	if got := ask(tokenA, -1001500, "/voice"); !strings.Contains(got.Param("text"), "on") {
		t.Fatalf("/voice by Friends' admin = %q", got.Param("text"))
	}
	if got := ask(tokenA, -1001500, "hello"); got.Method != "sendVoice" {
		t.Fatalf("Friends' admin, voice on: %s %q", got.Method, got.Param("text"))
	}
	if got := ask(tokenA, -1002600, "hello"); got.Param("text") != "You said: Neighbours: hello" {
		t.Fatalf("Neighbours' admin, their own allowance and voice setting: %s %q", got.Method, got.Param("text"))
	}
	if got := ask(tokenA, -1001500, "again"); got.Param("text") != "Enough for today." {
		t.Fatalf("Friends' admin over the limit: %q", got.Param("text"))
	}
	ctx := context.Background()
	for sender, want := range map[int64]int{-1001500: 1, -1002600: 1, anonymousAdmin: 0} {
		if n, _ := h.store.DailyCount(ctx, "alpha", sender, time.Now()); n != want {
			t.Errorf("daily count of %d = %d, want %d", sender, n, want)
		}
	}
	// The voice note is filed under its sender, the group.
	if files, _ := filepath.Glob(filepath.Join(h.data, "audio-output", "bot-alpha", "user--1001500", "*.ogg")); len(files) != 1 {
		t.Errorf("voice notes filed for Friends' admin: %v", files)
	}

	if got := ask(tokenB, -1001500, "hi"); got.Param("text") != "You said: Friends: hi" {
		t.Fatalf("allowed group's admin: %q", got.Param("text"))
	}
	if got := ask(tokenB, -1002600, "hi"); got.Param("text") != "Private bot." {
		t.Fatalf("another group's admin: %q", got.Param("text"))
	}
}

// A voice answer longer than one voice note holds goes out as several, in
// order, each a reply to the message; sent as soon as the tool reported
// them, before the model's closing words, whose cost still counts.
func TestGroupVoiceAnswerInSeveralNotes(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "tts:\n  enabled: true\n")}, nil)
	h.srv.SendMessage(tokenA, groupMessage(7, "tell me everything #notes #early", true))
	notes := h.waitSent(tokenA, 3, "sendVoice")
	var asked int
	for i, c := range notes {
		var reply struct {
			MessageID int `json:"message_id"`
		}
		if err := json.Unmarshal([]byte(c.Param("reply_parameters")), &reply); err != nil || reply.MessageID == 0 {
			t.Errorf("note %d: reply_parameters %q, want a reply to the message", i+1, c.Param("reply_parameters"))
		}
		if i == 0 {
			asked = reply.MessageID
		} else if reply.MessageID != asked {
			t.Errorf("note %d replies to %d, the first to %d", i+1, reply.MessageID, asked)
		}
		if got, want := string(c.Files["voice"].Data), "OggS-voice"+string(rune('1'+i)); got != want {
			t.Errorf("note %d holds %q, want %q: the notes out of order", i+1, got, want)
		}
	}
	summary := h.waitLog("request")
	if f := summary.ContextMap(); f["outcome"] != "ok" || f["cost_usd"] != 0.011 {
		t.Errorf("summary %v: want ok, with the closing words' cost", f)
	}
	if sent := h.srv.Sent(tokenA, "sendMessage", "sendVoice"); len(sent) != 3 {
		t.Errorf("%d messages sent, want the three notes only", len(sent))
	}
}
