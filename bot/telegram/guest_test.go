package telegram

import (
	"fmt"
	"testing"

	"brainbot/message"
)

// guestUpdate is a guest_message as Telegram sends it when caller (a
// user, or the chat they write as) summons the bot by @mention in chat.
func guestUpdate(chat, caller string) string {
	return `{"update_id":4,"guest_message":{"message_id":31,"date":1795581590,"chat":` + chat + `,` + caller +
		`,"guest_query_id":"AAHvE2kZAAAAAOQQ","text":"@test_bot what did she mean?","entities":[{"type":"mention","offset":0,"length":9}],` +
		`"reply_to_message":{"message_id":30,"date":1795581500,"chat":` + chat + `,"from":{"id":9,"is_bot":false,"first_name":"Cy"},"text":"my PIN is 4321"}}}`
}

func callerUser(id int64, name string) string {
	user := fmt.Sprintf(`{"id":%d,"is_bot":false,"first_name":%q}`, id, name)
	return `"from":` + user + `,"guest_bot_caller_user":` + user
}

// A guest conversation is the caller's in the chat they summoned the bot
// to. In a private chat Telegram names the chat by the other party
// (guest_message.chat is Cy for Ann's chat with Cy and for Bo's), so the
// chat alone would put both callers, and the bot's own private chat with
// Cy, in one conversation; in a group the chat's own conversation is
// not the guest's either.
func TestGuestConversationKeys(t *testing.T) {
	const (
		withCy = `{"id":9,"type":"private","first_name":"Cy"}`
		club   = `{"id":-1009876543210,"type":"supergroup","title":"Book club"}`
		forum  = `{"id":-1009876543210,"type":"supergroup","title":"Book club","is_forum":true}`
	)
	asChat := `"from":{"id":1087968824,"is_bot":true,"first_name":"Group"},"sender_chat":` + club + `,"guest_bot_caller_chat":` + club
	updates := map[string]string{
		"Ann with Cy":      guestUpdate(withCy, callerUser(7, "Ann")),
		"Bo with Cy":       guestUpdate(withCy, callerUser(8, "Bo")),
		"Ann in the club":  guestUpdate(club, callerUser(7, "Ann")),
		"Bo in the club":   guestUpdate(club, callerUser(8, "Bo")),
		"the club as club": guestUpdate(club, asChat),
	}
	owners := map[message.Key]string{
		{Bot: "b", Chat: 9}:              "the bot's private chat with Cy",
		{Bot: "b", Chat: 7}:              "the bot's private chat with Ann",
		{Bot: "b", Chat: 8}:              "the bot's private chat with Bo",
		{Bot: "b", Chat: -1009876543210}: "the club's own conversation",
	}
	for name, raw := range updates {
		_, key, ok := KeyOf("b", []byte(raw))
		u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(raw)})
		if !ok || u.Key != key || u.Guest == nil {
			t.Errorf("%s: KeyOf %+v, Decode %+v (guest %v)", name, key, u.Key, u.Guest)
			continue
		}
		if other, taken := owners[key]; taken {
			t.Errorf("%s has key %+v, that of %s", name, key, other)
		}
		owners[key] = name
	}
	// The caller's guest conversation in a forum is one, whatever topic
	// they summon the bot from.
	inTopic := guestUpdate(forum, callerUser(7, "Ann"))
	inTopic = inTopic[:len(inTopic)-2] + `,"message_thread_id":12,"is_topic_message":true}}`
	_, topic, _ := KeyOf("b", []byte(inTopic))
	if _, club, _ := KeyOf("b", []byte(updates["Ann in the club"])); topic != club {
		t.Errorf("Ann in a topic of the club has key %+v, in the club %+v: want one conversation", topic, club)
	}
	// A guest message nobody can be named the caller of is not answered.
	if u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(guestUpdate(club, `"author_signature":"x"`))}); u.Kind != message.Unhandled {
		t.Errorf("a guest message without a caller read as %+v, want it unhandled", u)
	}
}
