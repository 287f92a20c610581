package main

import (
	"context"
	"testing"
	"time"

	"brainbot/bot/telegramtest"
	"brainbot/cmd/internal/stack"
)

// An instance started before its NATS (a reboot where NATS comes up
// late) does not exit: it logs each try to reach NATS, tried again with
// backoff, and once the nats-server starts on its port it joins and
// answers.
func TestClusterInstanceWaitsForALateNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a brainbot process")
	}
	c := newCluster(t, []string{"alpha"}, 0)
	c.server.Stop() // nothing listens at BRAINBOT_NATS_URL yet
	in := c.launch("i0")
	waiting := msgStarts("waiting for NATS: cannot reach it yet")
	c.waitLog(in, time.Minute, "two tries to reach NATS logged", waiting, 2)
	var waits []float64
	in.logs.each(func(l map[string]any) {
		if waiting(l) {
			waits = append(waits, l["again_in_ms"].(float64))
		}
	})
	if waits[1] <= waits[0] {
		t.Errorf("waits between tries %v, want them growing", waits)
	}

	c.server.Restart()
	c.waitLog(in, time.Minute, "NATS reached", func(l map[string]any) bool { return l["msg"] == "NATS reached" }, 1)
	c.waitLog(in, time.Minute, "its first partition", func(l map[string]any) bool { return l["msg"] == "partition taken" }, 1)
	token := stack.Token("alpha")
	const user = 5151
	c.tg.SendText(token, user, user, "hello")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := c.tg.WaitCall(ctx, token, func(call telegramtest.Call) bool {
		return call.Method == "sendMessage" && call.ChatID() == user
	}); err != nil {
		t.Fatalf("no answer once NATS came: %v; log: %s", err, c.tail("i0"))
	}
	notJSON(t, in)
}
