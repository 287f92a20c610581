package telegram

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"brainbot/message"

	"github.com/go-telegram/bot/models"
)

func TestParseCommand(t *testing.T) {
	ent := func(n int) []models.MessageEntity {
		return []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 0, Length: n}}
	}
	for _, tc := range []struct {
		text     string
		entities []models.MessageEntity
		cmd      string
		other    bool
	}{
		{"/start", ent(6), "start", false},
		{"/Help me", ent(5), "help", false},
		{"/reset@MyBot", ent(12), "reset", false},
		{"/reset@other_bot", ent(16), "", true},
		{"/start", nil, "", false},
		{"hi /start", []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 3, Length: 6}}, "", false},
		// Entities that do not fit the text mark nothing.
		{"/start", ent(-1), "", false},
		{"/start", ent(99), "", false},
		{"/start", []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 1 << 62, Length: 1 << 62}}, "", false},
	} {
		cmd, other := parseCommand(tc.text, tc.entities, "mybot")
		if cmd != tc.cmd || other != tc.other {
			t.Errorf("parseCommand(%q) = %q,%v; want %q,%v", tc.text, cmd, other, tc.cmd, tc.other)
		}
	}
}

const me = `{"id":1001,"is_bot":true,"first_name":"Tester","username":"test_bot"}`

var bot = message.Identity{ID: 1001, Username: "test_bot"}

// The fixtures of updates the client library cannot decode are read as
// Unreadable, with who wrote them only when a person did.
func TestUnreadableUpdates(t *testing.T) {
	for file, sender := range map[string]int64{
		"forward-origin.json": 7, "paid-media.json": 7, "reply-origin.json": 7,
		"reaction.json": 0, "background.json": 0, "boost.json": 0, "member-status.json": 0,
		// Fields of another JSON type than the library's hide nothing
		// else: the sender and the chat are read all the same.
		"wrong-type-text.json": 7, "wrong-type-topic.json": 7, "wrong-type-tap.json": 7,
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", "undecodable", file))
		if err != nil {
			t.Fatal(err)
		}
		var lib models.Update
		if json.Unmarshal(raw, &lib) == nil {
			t.Fatalf("the library decodes %s now: replace it with a type it does not know", file)
		}
		u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: raw})
		if u.Kind != message.Unreadable || u.Problem == nil || u.Sender != sender || u.ID == 0 {
			t.Errorf("%s read as %+v, want unreadable from %d", file, u, sender)
		}
		// A tap is answered, but nothing it names is trusted.
		if tap := u.Tap; (file == "wrong-type-tap.json") != (tap.QueryID != "") || tap.QueryID != "" && (!tap.Inaccessible || tap.Data != "") {
			t.Errorf("%s read as the tap %+v", file, tap)
		}
	}
}

// Every kind of update with a chat has its conversation's key, a forum
// topic its thread (a topic of a group only); one without a chat has
// none. An update the library would not decode has a key too.
func TestKeyOfEveryKind(t *testing.T) {
	for raw, want := range map[string]message.Key{
		`{"update_id":5,"message":{"chat":{"id":7,"type":"private"},"message_thread_id":3}}`:                               {Bot: "b", Chat: 7},
		`{"update_id":5,"message":{"chat":{"id":-100,"type":"supergroup"},"message_thread_id":3,"is_topic_message":true}}`: {Bot: "b", Chat: -100, Thread: 3},
		`{"update_id":5,"edited_message":{"chat":{"id":-100,"type":"supergroup"},"message_thread_id":3}}`:                  {Bot: "b", Chat: -100},
		`{"update_id":5,"callback_query":{"id":"1","message":{"chat":{"id":7,"type":"private"}}}}`:                         {Bot: "b", Chat: 7},
		`{"update_id":5,"my_chat_member":{"chat":{"id":-100,"type":"group"}}}`:                                             {Bot: "b", Chat: -100},
		`{"update_id":5,"message_reaction":{"chat":{"id":-100,"type":"group"},"reaction_kind":"from the future"}}`:         {Bot: "b", Chat: -100},
		`{"update_id":5,"inline_query":{"id":"1","query":"x"}}`:                                                            {Bot: "b"},
	} {
		id, key, ok := KeyOf("b", []byte(raw))
		if !ok || id != 5 || key != want {
			t.Errorf("KeyOf(%s) = %d %+v %v, want %+v", raw, id, key, ok, want)
		}
		if u := Decode(message.Envelope{Bot: "b", Raw: []byte(raw)}); u.Key != want {
			t.Errorf("Decode(%s).Key = %+v, want %+v", raw, u.Key, want)
		}
	}
	// A field of another type is left out; the rest of the key is read.
	wrongTypes, err := os.ReadFile(filepath.Join("testdata", "undecodable", "wrong-type-topic.json"))
	if err != nil {
		t.Fatal(err)
	}
	if id, key, ok := KeyOf("b", wrongTypes); !ok || id != 10 || key != (message.Key{Bot: "b", Chat: -1004001}) {
		t.Errorf("KeyOf(a topic's message with wrong types) = %d %+v %v", id, key, ok)
	}
	if _, _, ok := KeyOf("b", []byte(`{"message":{}}`)); ok {
		t.Error("an update without an id has a key")
	}
}

// A group message reads with its facts for the intake: the sender's name,
// the text without the bot's mention, whom it addresses; the bot's own
// membership changing is Membership; an edit is Edited, read as the
// message it is now.
func TestDecodeReadsWhatTheIntakeNeeds(t *testing.T) {
	u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(`{"update_id":9,"message":{"message_id":4,"date":1,` +
		`"chat":{"id":-100,"type":"supergroup","title":"Friends"},"from":{"id":7,"is_bot":false,"first_name":"Ann","last_name":"Lee","language_code":"de"},` +
		`"text":"@test_bot hi there","entities":[{"type":"mention","offset":0,"length":9}],"reply_to_message":{"message_id":3,"date":1,` +
		`"chat":{"id":-100,"type":"supergroup"},"from":` + me + `}}}`)})
	if u.Kind != message.Written || u.Text != "hi there" || !u.Mentioned || !u.RepliesToMe || u.SenderName != "Ann Lee" || u.FirstName != "Ann" ||
		u.Language != "de" || u.Sender != 7 || u.MessageID != 4 || !u.InGroup() || !u.Addressed() {
		t.Errorf("group message read as %+v", u)
	}
	m := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(`{"update_id":10,"my_chat_member":{"chat":{"id":-100,"type":"group"},` +
		`"from":{"id":7,"is_bot":false,"first_name":"Ann"},"date":1,"old_chat_member":{"status":"member","user":` + me + `},` +
		`"new_chat_member":{"status":"left","user":` + me + `}}}`)})
	if m.Kind != message.Membership || !m.Member.Left || m.Member.By != 7 || m.Member.Status != "left" {
		t.Errorf("membership read as %+v", m)
	}
	e := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(`{"update_id":11,"edited_message":{"message_id":4,"date":1,"edit_date":2,` +
		`"chat":{"id":7,"type":"private"},"from":{"id":7,"is_bot":false,"first_name":"Ann"},"text":"changed"}}`)})
	if e.Kind != message.Edited || e.What != "edited_message" || e.Text != "changed" || e.MessageID != 4 || e.Sender != 7 {
		t.Errorf("edit read as %+v", e)
	}
}

// A tap in a private chat, as Telegram sends it.
func TestDecodeTapFixture(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "updates", "callback_query.json"))
	if err != nil {
		t.Fatal(err)
	}
	u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: raw})
	if u.Kind != message.Tapped || u.What != "callback_query" || u.ID != 731000004 || u.Key != (message.Key{Bot: "b", Chat: 7}) ||
		u.MessageID != 413 || u.Sender != 7 || u.Tap != (message.Tap{QueryID: "3148915127338413297", Data: "k3Jx9vQwZ2bT8mLp.1"}) {
		t.Errorf("tap read as %+v", u)
	}
}

// Taps read as Telegram sends them (callback_query): on a message in a
// forum topic (its thread in the key), on an old message Telegram no
// longer gives (date 0), on an inline message (in no chat), by a bot.
func TestDecodeTaps(t *testing.T) {
	from := `"from":{"id":7,"is_bot":false,"first_name":"Ann","last_name":"Lee","language_code":"de"}`
	topic := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(`{"update_id":12,"callback_query":{"id":"4382bfdwdsb323b2d9",` + from + `,` +
		`"message":{"message_id":100004,"date":1764000000,"chat":{"id":-100,"type":"supergroup","title":"Friends","is_forum":true},` +
		`"message_thread_id":5,"is_topic_message":true,"from":` + me + `,"text":"Which city?",` +
		`"reply_markup":{"inline_keyboard":[[{"text":"Paris","callback_data":"k3Jx9vQwZ2bT8mLp.0"}]]}},` +
		`"chat_instance":"-6000000000000000000","data":"k3Jx9vQwZ2bT8mLp.0"}}`)})
	want := message.Tap{QueryID: "4382bfdwdsb323b2d9", Data: "k3Jx9vQwZ2bT8mLp.0", ChatTitle: "Friends"}
	if topic.Kind != message.Tapped || topic.What != "callback_query" || topic.Tap != want || topic.Key != (message.Key{Bot: "b", Chat: -100, Thread: 5}) ||
		topic.MessageID != 100004 || topic.Sender != 7 || topic.SenderName != "Ann Lee" || topic.FirstName != "Ann" || topic.Language != "de" || !topic.InGroup() {
		t.Errorf("tap in a forum topic read as %+v", topic)
	}
	old := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(`{"update_id":13,"callback_query":{"id":"77",` + from + `,` +
		`"message":{"message_id":4,"date":0,"chat":{"id":7,"type":"private","first_name":"Ann"}},"chat_instance":"1","data":"x.0"}}`)})
	if old.Kind != message.Tapped || !old.Tap.Inaccessible || old.MessageID != 4 || old.Key != (message.Key{Bot: "b", Chat: 7}) || !old.Private() {
		t.Errorf("tap on an inaccessible message read as %+v", old)
	}
	inline := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(`{"update_id":14,"callback_query":{"id":"78",` + from + `,` +
		`"inline_message_id":"AAAAAA","chat_instance":"1","data":"x.0"}}`)})
	if inline.Kind != message.Tapped || !inline.Tap.Inaccessible || inline.Key.Chat != 0 {
		t.Errorf("tap on an inline message read as %+v", inline)
	}
	byBot := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(`{"update_id":15,"callback_query":{"id":"79","from":{"id":9,"is_bot":true,"first_name":"Other"},` +
		`"message":{"message_id":4,"date":1764000000,"chat":{"id":7,"type":"private"},"text":"hi"},"chat_instance":"1","data":"x.0"}}`)})
	if !byBot.Tap.FromBot || byBot.Tap.Inaccessible {
		t.Errorf("tap by a bot read as %+v", byBot)
	}
}
