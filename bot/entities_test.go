package bot

import (
	"fmt"
	"testing"

	"brainbot/bot/telegramtest"
)

// Entities whose offset or length does not fit the text they mark
// (negative, past the end, or overflowing when added up) are ignored: the
// message reads as if they were not there, in texts and captions, in
// private chats and groups, and the bot goes on. The updates are raw JSON
// as Telegram sends it; before, a negative length took the process down
// for good.
func TestMalformedEntitiesAreIgnored(t *testing.T) {
	h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "messages:\n  unsupported: Can't open that.\n")},
		func(c *Config) { c.QueueSize = 100 }) // every message is answered, none is dropped as a burst
	botID := telegramtest.BotID(tokenA)
	malformed := []string{
		`{"type":"mention","offset":0,"length":-5}`,
		`{"type":"mention","offset":-3,"length":13}`,
		`{"type":"mention","offset":40,"length":13}`,                                   // past the end
		`{"type":"mention","offset":0,"length":99}`,                                    // past the end
		`{"type":"mention","offset":4611686018427387904,"length":4611686018427387904}`, // the sum overflows
		fmt.Sprintf(`{"type":"text_mention","offset":0,"length":-5,"user":{"id":%d,"is_bot":true,"first_name":"Tester"}}`, botID),
		`{"type":"bot_command","offset":0,"length":-1}`,
		`{"type":"bot_command","offset":0,"length":99}`,
	}
	const (
		private = `{"id":7,"type":"private","first_name":"Ann"}`
		group   = `{"id":-1001500,"type":"supergroup","title":"Friends"}`
		video   = `"video":{"file_id":"v","file_unique_id":"v","width":640,"height":480,"duration":3}`
	)
	send := func(chat, content string) {
		h.srv.SendUpdate(tokenA, fmt.Appendf(nil,
			`{"update_id":1,"message":{"message_id":%d,"date":1763888000,"chat":%s,"from":{"id":7,"is_bot":false,"first_name":"Ann"},%s}}`,
			messageIDs.Add(1), chat, content))
	}
	mention := "@" + telegramtest.Username(tokenA)
	var want []string
	for _, e := range malformed {
		send(private, fmt.Sprintf(`"text":"hello %s","entities":[%s]`, mention, e))
		want = append(want, "7:You said: hello "+mention)
		send(private, fmt.Sprintf(`%s,"caption":"hello %s","caption_entities":[%s]`, video, mention, e))
		want = append(want, "7:Can't open that.")
		// Not addressed to the bot without a valid mention: no answer.
		send(group, fmt.Sprintf(`"text":"%s hello","entities":[%s]`, mention, e))
		send(group, fmt.Sprintf(`%s,"caption":"%s look","caption_entities":[%s]`, video, mention, e))
	}
	// A valid mention beside a malformed one still addresses the bot. It
	// comes last in the group's queue: a wrong answer to the messages
	// before it would come before its own.
	send(group, fmt.Sprintf(`"text":"%s still there?","entities":[{"type":"mention","offset":0,"length":%d},%s]`,
		mention, len(mention), malformed[0]))
	want = append(want, "-1001500:You said: Ann: still there?")

	wantSent(t, h, want...)
	if err := h.srv.WaitConfirmed(h.ctx(), tokenA); err != nil {
		t.Fatalf("updates left unconfirmed: %v", err)
	}
	if n := h.logs.FilterMessage(panicLog).Len(); n > 0 {
		t.Errorf("%d panics contained: malformed entities must be refused before use", n)
	}
}
