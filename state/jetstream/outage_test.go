package jetstream

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"brainbot/message"
	"brainbot/state"
	"brainbot/state/jetstream/natstest"
)

// While the nats-server is away a call to the shared state waits and
// retries, and is answered once it is back: an outage is a pause. One
// that outlasts the patience ends in state.ErrUnavailable (the message
// is handed back, nobody told of an error), and a usage record is kept on
// disk and written once NATS is back. Status reports the outage.
func TestAnOutageIsAPause(t *testing.T) {
	server := natstest.StartServer(t)
	connect := func(name string, patience time.Duration, spool string) *Cluster {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		c, err := Connect(ctx, Config{URL: server.URL, Instance: name, Partitions: 2, Patience: patience, SpoolDir: spool,
			Log: zaptest.NewLogger(t).Named(name)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	patient := connect("patient", hangGuard, "")
	spool := t.TempDir()
	hasty := connect("hasty", 300*time.Millisecond, spool)
	ctx := context.Background()
	conv := message.Key{Bot: "bot", Chat: 7}
	if err := patient.State().UseSession(ctx, conv, "s1", time.Now()); err != nil {
		t.Fatal(err)
	}

	server.Stop()
	read := make(chan error, 1)
	go func() {
		sess, ok, err := patient.State().Session(ctx, conv)
		if err == nil && (!ok || sess.ID != "s1") {
			err = errors.New("session " + sess.ID + " after the outage, want s1")
		}
		read <- err
	}()
	if _, _, err := hasty.State().Session(ctx, conv); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("a read past the patience: %v, want ErrUnavailable", err)
	}
	usage := state.Usage{At: time.Now(), Bot: "bot", User: 1, RequestID: "r1", Mode: "text", Outcome: "ok", ClaudeUSD: 0.5}
	if err := hasty.State().RecordUsage(ctx, usage); err != nil {
		t.Fatalf("a usage record during the outage: %v, want it kept", err)
	}
	if kept, _ := os.ReadDir(spool); len(kept) != 1 {
		t.Fatalf("%d files in the spool, want the record", len(kept))
	}
	waitFor(t, hangGuard, "the outage reported", func() bool { return !patient.Status().UnavailableSince.IsZero() })
	select {
	case err := <-read:
		t.Fatalf("the read ended while NATS was away: %v", err)
	default:
	}

	server.Restart()
	if err := <-read; err != nil {
		t.Fatalf("the read across the outage: %v", err)
	}
	waitFor(t, hangGuard, "the kept usage record written", func() bool {
		kept, _ := os.ReadDir(spool)
		return len(kept) == 0
	})
	lines, err := UsageReport(ctx, server.URL, state.UsageFilter{Since: usage.At.Add(-time.Hour)})
	if err != nil || len(lines) != 1 || lines[0].Requests != 1 {
		t.Errorf("usage report after the outage: %+v %v, want the one record", lines, err)
	}
	if spent, err := hasty.State().SpentToday(ctx, "bot", 1, usage.At); err != nil || spent != 0.5 {
		t.Errorf("spent %v %v after the kept record was written, want 0.5", spent, err)
	}
	st := patient.Status()
	if !st.UnavailableSince.IsZero() || st.Outages != 1 {
		t.Errorf("status after the outage: since %v, %d outages; want over, 1", st.UnavailableSince, st.Outages)
	}
}
