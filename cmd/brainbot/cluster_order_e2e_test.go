package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"brainbot/admin"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
	"brainbot/state/jetstream/natstest"
)

// A message whose answer cannot be kept is handed back while the next
// one of its conversation waits behind it: NATS refuses to store its
// transcript (here its object store takes no message for a moment; an
// outage longer than the patience does the same). The answer is not
// sent, and the message behind it is not answered first, in a session
// without that turn (as if the first had never been sent): both are
// answered in the order they were sent, each with the whole history.
func TestEndToEndClusterHandedBackMessageKeepsItsTurn(t *testing.T) {
	nc, err := nats.Connect(natstest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s := newStackWith(t, []string{"BRAINBOT_NATS_URL=" + nc.ConnectedUrl(), "BRAINBOT_NATS_PARTITIONS=4", "BRAINBOT_HTTP_ADDR=127.0.0.1:0"})
	const user = 733
	if got := wantText(t, ask(t, s, "narrator", user, "first")); got != "You said: first (message 1)" {
		t.Fatalf("first answer %q", got)
	}
	resumeSecond := s.Model.Pause()
	defer resumeSecond()
	mark := s.Logs().Len()
	s.Send("narrator", user, "second")
	waitModelAsked(t, s.Model, "second")
	s.Send("narrator", user, "third")
	waitStatus(t, adminSocket(t, s), "narrator", func(b admin.BotStatus) bool { return b.Waiting == 1 })

	// The transcripts' store refuses every write until it is given back.
	giveBack := refuseTranscripts(t, nc)
	resumeRetries := s.Model.Pause() // the second's next attempt waits until the store is back
	defer resumeRetries()
	resumeSecond()
	waitLogFrom(t, s, mark, func(l stack.Line) bool {
		return l.Msg == "request" && l.Str("outcome") == "paused" && l.Int("user") == user
	})
	giveBack()
	resumeRetries()

	var texts []string
	for deadline := time.Now().Add(waitLong); len(texts) < 3 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		texts = texts[:0]
		for _, c := range s.ChatCalls("narrator", user) {
			if c.Method == "sendMessage" && c.Code == 200 {
				texts = append(texts, stack.Rendered(c))
			}
		}
	}
	want := []string{"You said: first (message 1)", "You said: second (message 2)", "You said: third (message 3)"}
	if !slices.Equal(texts, want) {
		t.Errorf("answers %q, want %q: in order, each with the history before it", texts, want)
	}
}

// waitModelAsked waits until the model stand-in got a request whose last
// message holds text.
func waitModelAsked(t *testing.T, m *claudetest.Model, text string) {
	t.Helper()
	for deadline := time.Now().Add(waitLong); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, r := range m.Requests() {
			if n := len(r.Messages); n > 0 && slices.ContainsFunc(r.Messages[n-1].Content, func(b claudetest.Block) bool {
				return strings.Contains(b.Text, text)
			}) {
				return
			}
		}
	}
	t.Fatalf("the model was never asked %q", text)
}

// refuseTranscripts makes the transcripts' object store take no message
// (each is over its size limit) until giveBack is called.
func refuseTranscripts(t *testing.T, nc *nats.Conn) (giveBack func()) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := js.Stream(ctx, "OBJ_brainbot_transcripts")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	limit := cfg.MaxMsgSize
	cfg.MaxMsgSize = 1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		cfg.MaxMsgSize = limit
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
}
