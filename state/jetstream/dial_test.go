package jetstream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/state/jetstream/natstest"
)

// An instance started before NATS (a reboot) waits for it, logging each
// try, and joins once the server is up.
func TestConnectWaitsForANATSThatStartsLate(t *testing.T) {
	srv := natstest.StartServer(t)
	srv.Stop()
	core, logs := observer.New(zap.DebugLevel)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	joined := make(chan error, 1)
	go func() {
		c, err := Connect(ctx, Config{URL: srv.URL, Instance: "late", Partitions: 2, WaitForNATS: true, Log: zap.New(core)})
		if err == nil {
			c.Close()
		}
		joined <- err
	}()
	tries := func() int { return logs.FilterMessageSnippet("waiting for NATS: cannot reach it yet").Len() }
	waitFor(t, hangGuard, "two tries logged", func() bool { return tries() >= 2 })
	srv.Restart()
	if err := <-joined; err != nil {
		t.Fatalf("Connect once NATS is up: %v", err)
	}
	if n := logs.FilterMessage("NATS reached").Len(); n != 1 {
		t.Errorf("%d lines say NATS was reached, want 1", n)
	}
}

// Without WaitForNATS (the admin's commands) an unreachable NATS fails at
// once; it is no refusal.
func TestConnectFailsAtOnceWithoutWaiting(t *testing.T) {
	srv := natstest.StartServer(t)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := Connect(ctx, Config{URL: srv.URL, Instance: "cli", Partitions: 2})
	if err == nil || Refused(err) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect to nothing: %v, want a failure that is no refusal", err)
	}
}

// Credentials NATS does not take are a refusal: Connect does not wait,
// and Ping says so too.
func TestWrongCredentialsAreARefusal(t *testing.T) {
	srv := natstest.StartServer(t, func(o *server.Options) { o.Username, o.Password = "brainbot", "right" })
	url := strings.Replace(srv.URL, "nats://", "nats://brainbot:wrong@", 1)
	core, logs := observer.New(zap.DebugLevel)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := Connect(ctx, Config{URL: url, Instance: "i", Partitions: 2, WaitForNATS: true, Log: zap.New(core)})
	if !Refused(err) || strings.Contains(err.Error(), "wrong") {
		t.Errorf("Connect with a wrong password: %v, want a refusal without the password", err)
	}
	if n := logs.FilterMessageSnippet("waiting for NATS").Len(); n != 0 {
		t.Errorf("%d tries logged for a refusal", n)
	}
	if _, err := Ping(ctx, url); !Refused(err) {
		t.Errorf("Ping with a wrong password: %v, want a refusal", err)
	}
	right := strings.Replace(srv.URL, "nats://", "nats://brainbot:right@", 1)
	if info, err := Ping(ctx, right); err != nil || info.Servers != 1 || info.Cluster != "" {
		t.Errorf("Ping: %+v, %v, want one server, no cluster", info, err)
	}
}

// A nats-server without JetStream is a refusal too: no retry turns it on.
func TestNATSWithoutJetStreamIsARefusal(t *testing.T) {
	srv := natstest.StartServer(t, func(o *server.Options) { o.JetStream = false })
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := Ping(ctx, srv.URL); !Refused(err) {
		t.Errorf("Ping of a server without JetStream: %v, want a refusal", err)
	}
}
