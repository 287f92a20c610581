package jetstream

import (
	"context"
	"errors"
	"strings"
	"testing"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/state/jetstream/natstest"
)

// Debian 12's nats-server 2.9.10 passed doctor, and run then retried a
// refusal for a minute: the version says at once what it lacks.
func TestServerVersionNamesWhatIsMissing(t *testing.T) {
	for _, c := range []struct {
		version string
		missing []string // "" none
	}{
		{"2.9.10", []string{"subject transforms", "pinned consumers", "2.11.0 or newer"}},
		{"2.10.22", []string{"pinned consumers", "2.11.0 or newer"}},
		{"2.11.0", nil},
		{"2.12.1", nil},
		{"v2.11.0-beta.2", nil},
		{"3.0.0", nil},
		{"", []string{"not understood", "2.11.0 or newer"}},
		{"2.x", []string{"not understood"}},
	} {
		err := checkServerVersion(c.version)
		if c.missing == nil {
			if err != nil {
				t.Errorf("%q: %v, want none", c.version, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: no error, want one naming %q", c.version, c.missing)
			continue
		}
		for _, m := range c.missing {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%q: %v, want it to name %q", c.version, err, m)
			}
		}
		if c.version == "2.10.22" && strings.Contains(err.Error(), "subject transforms") {
			t.Errorf("%q: %v names a feature it has", c.version, err)
		}
	}
}

// A refusal no retry can change (here: three replicas asked of a server
// that is not clustered, as BRAINBOT_NATS_REPLICAS=3 against one
// nats-server) ends the start at the first try, and the error says the
// server's words, not "context deadline exceeded".
func TestConnectDoesNotRetryAPermanentRefusal(t *testing.T) {
	server := natstest.StartServer(t)
	core, logs := observer.New(zap.DebugLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 10*hangGuard)
	defer cancel()
	c, err := Connect(ctx, Config{URL: server.URL, Instance: "i", Partitions: 2, Replicas: 3,
		StartWait: 10 * hangGuard, Log: zap.New(core)})
	if err == nil {
		c.Close()
		t.Fatal("connected with three replicas on one server")
	}
	if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "replicas > 1 not supported") {
		t.Errorf("error %q, want the server's refusal", err)
	}
	var apiErr *jsapi.APIError
	if !errors.As(err, &apiErr) {
		t.Errorf("error %q does not wrap the server's", err)
	}
	if !Refused(err) {
		t.Errorf("error %q is no Refusal: run would exit for a restart", err)
	}
	if n := logs.FilterMessageSnippet("trying again").Len(); n != 0 {
		t.Errorf("%d retries logged for a permanent refusal", n)
	}
}

// What a forming cluster says passes; a refusal of the configuration or
// a feature the server lacks does not.
func TestPermanentRefusals(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&jsapi.APIError{Code: 500, ErrorCode: 10074, Description: "replicas > 1 not supported in non-clustered mode"}, true},
		{&jsapi.APIError{Code: 400, ErrorCode: 10052, Description: "stream configuration is invalid"}, true},
		{jsapi.ErrStreamSubjectTransformNotSupported, true},
		{&jsapi.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement"}, false},
		{&jsapi.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, false},
		{context.DeadlineExceeded, false},
		{errors.New("nats: timeout"), false},
	} {
		if got := permanent(c.err); got != c.want {
			t.Errorf("permanent(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
