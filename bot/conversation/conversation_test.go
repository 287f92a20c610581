package conversation

import (
	"context"
	"testing"

	"brainbot/message"
)

// A bot without a brain here may still have a message turned away by a
// full queue. The busy answer must drop the message, finished and with
// its summary line, rather than crash the process on a nil brain.
func TestBusyWithoutABrainDropsTheMessage(t *testing.T) {
	k := newKit(t, "")
	in := k.inbound(message.Update{Key: message.Key{Bot: "gone", Chat: 7}, Sender: 7, Text: "hi"})
	k.p.Busy(context.Background(), in, true)
	k.want("out")
	k.want("progress", "finish keep=false")
	if got := k.outcome(in.RequestID); got != "dropped" {
		t.Errorf("outcome %q, want dropped", got)
	}
	if n := k.logs.FilterMessageSnippet("panic").Len(); n != 0 {
		t.Errorf("%d panics contained, want none", n)
	}
}
