package message

import "testing"

// A guest conversation's key is apart from every chat's own (Thread 0, or
// a forum topic's positive id) and from every other caller's, users and
// chats alike, across Telegram's 52-bit ids; a chat's own key is named
// as it always was.
func TestGuestKey(t *testing.T) {
	const max = 1<<52 - 1
	seen := map[Key]int64{}
	for _, caller := range []int64{1, 7, max, -1, -7, -1001234567890, -max, 0} {
		k := GuestKey("b", -100, caller)
		if k.Thread >= 0 {
			t.Errorf("caller %d: thread %d, where a chat's own conversations are", caller, k.Thread)
		}
		if other, taken := seen[k]; taken {
			t.Errorf("callers %d and %d share key %v", caller, other, k)
		}
		seen[k] = caller
	}
	if got := (Key{Bot: "b", Chat: -100, Thread: 3}).String(); got != "b/-100/3" {
		t.Errorf("a topic's key reads %q", got)
	}
}
