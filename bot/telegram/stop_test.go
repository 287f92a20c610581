package telegram

import (
	"testing"

	"brainbot/message"
)

// A stop button pressed reads as StopPressed in its private chat's
// conversation, with the draft it names; one that cannot be a stop (not
// a private chat, no draft) is Unhandled.
func TestDecodeStopButton(t *testing.T) {
	for raw, want := range map[string]message.Update{
		`{"update_id":5,"stopped_message_generation":{"chat":{"id":7,"first_name":"Ann","type":"private"},"draft_id":42}}`: {
			Kind: message.StopPressed, Key: message.Key{Bot: "b", Chat: 7}, Sender: 7, DraftID: 42},
		`{"update_id":5,"stopped_message_generation":{"chat":{"id":-100,"title":"G","type":"supergroup"},"message_thread_id":3,"draft_id":42}}`: {
			Kind: message.Unhandled, Key: message.Key{Bot: "b", Chat: -100}},
		`{"update_id":5,"stopped_message_generation":{"chat":{"id":7,"type":"private"},"draft_id":0}}`: {
			Kind: message.Unhandled, Key: message.Key{Bot: "b", Chat: 7}},
	} {
		u := Decode(message.Envelope{Bot: "b", Me: bot, Raw: []byte(raw)})
		if u.Kind != want.Kind || u.Key != want.Key || u.Sender != want.Sender || u.DraftID != want.DraftID || u.What != "stopped_message_generation" {
			t.Errorf("Decode(%s) = %+v, want %+v", raw, u, want)
		}
		if _, key, _ := KeyOf("b", []byte(raw)); key != want.Key {
			t.Errorf("KeyOf(%s) = %+v, want %+v", raw, key, want.Key)
		}
	}
}
