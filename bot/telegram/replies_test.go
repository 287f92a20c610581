package telegram

import (
	"os"
	"path/filepath"
	"testing"

	"brainbot/message"
)

// What a message replies to reads from the update as Telegram sends it:
// the quote when the user quoted, else the replied-to text or caption,
// with its author; a reply to another chat's message by its origin.
func TestReadReply(t *testing.T) {
	const ann = `"from":{"id":7,"is_bot":false,"first_name":"Ann"}`
	const private = `"chat":{"id":7,"type":"private","first_name":"Ann"}`
	for name, tc := range map[string]struct {
		raw  string
		want *message.Reply
	}{
		"reply to the bot": {`{"update_id":1,"message":{"message_id":5,"date":1,` + private + `,` + ann + `,"text":"why?",` +
			`"reply_to_message":{"message_id":4,"date":1,` + private + `,"from":` + me + `,"text":"Because."}}}`,
			&message.Reply{Author: "Tester", Mine: true, Text: "Because."}},
		"quote of a caption": {`{"update_id":1,"message":{"message_id":5,"date":1,"chat":{"id":-100,"type":"supergroup","title":"G"},` + ann + `,"text":"this one",` +
			`"reply_to_message":{"message_id":4,"date":1,"chat":{"id":-100,"type":"supergroup","title":"G"},"from":{"id":8,"is_bot":false,"first_name":"Bob","last_name":"Ray"},` +
			`"photo":[{"file_id":"p","file_unique_id":"u","width":90,"height":90}],"caption":"left: cat, right: dog"},` +
			`"quote":{"text":"right: dog","position":10}}}`,
			&message.Reply{Author: "Bob Ray", Text: "right: dog", Quoted: true}},
		"reply to another chat": {`{"update_id":1,"message":{"message_id":5,"date":1,` + private + `,` + ann + `,"text":"true?",` +
			`"external_reply":{"origin":{"type":"channel","date":1,"chat":{"id":-1009,"type":"channel","title":"News"},"message_id":77},` +
			`"chat":{"id":-1009,"type":"channel","title":"News"},"message_id":77},"quote":{"text":"Rain tomorrow","position":0}}}`,
			&message.Reply{Author: "News", Text: "Rain tomorrow", Quoted: true}},
		"reply to a sticker": {`{"update_id":1,"message":{"message_id":5,"date":1,` + private + `,` + ann + `,"text":"lol",` +
			`"reply_to_message":{"message_id":4,"date":1,` + private + `,` + ann + `,"sticker":{"file_id":"s","file_unique_id":"u","type":"regular","width":1,"height":1,"is_animated":false,"is_video":false}}}}`,
			nil},
	} {
		u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(tc.raw)})
		if u.Kind != message.Written {
			t.Fatalf("%s: read as %+v", name, u)
		}
		switch {
		case tc.want == nil && u.ReplyTo != nil:
			t.Errorf("%s: reply %+v, want none", name, *u.ReplyTo)
		case tc.want != nil && (u.ReplyTo == nil || *u.ReplyTo != *tc.want):
			t.Errorf("%s: reply %+v, want %+v", name, u.ReplyTo, *tc.want)
		}
	}
}

// A guest message reads as a message from the user who summoned the bot,
// without the bot's mention, with the message it replies to.
func TestDecodeGuestMessage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "updates", "guest_message.json"))
	if err != nil {
		t.Fatal(err)
	}
	u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: raw})
	if u.Kind != message.Written || u.Guest == nil || u.Guest.QueryID != "AAHvE2kZAAAAAOQQ" || u.Sender != 7 || u.Text != "who wrote this?" ||
		u.Key != message.GuestKey("b", -1009876543210, 7) || u.ReplyTo == nil || u.ReplyTo.Author != "Bob" {
		t.Errorf("guest message read as %+v (reply %+v)", u, u.ReplyTo)
	}
	private := `{"update_id":2,"guest_message":{"message_id":1,"date":1,"chat":{"id":8,"type":"private","first_name":"Bo"},` +
		`"from":{"id":7,"is_bot":false,"first_name":"Ann"},"guest_query_id":"q","text":"@test_bot hi"}}`
	if _, key, _ := KeyOf("b", []byte(private)); key != message.GuestKey("b", 8, 7) {
		t.Errorf("a guest message in a private chat has key %+v, want one apart from any private conversation", key)
	}
	noQuery := `{"update_id":3,"guest_message":{"message_id":1,"date":1,"chat":{"id":-100,"type":"group","title":"G"},` +
		`"from":{"id":7,"is_bot":false,"first_name":"Ann"},"text":"@test_bot hi"}}`
	if u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(noQuery)}); u.Kind != message.Unhandled {
		t.Errorf("a guest message without a query read as %+v", u)
	}
}
