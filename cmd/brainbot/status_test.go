package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"brainbot/admin"
	"brainbot/bot"
	"brainbot/httpserve"
)

// statusBots are three bots as the Manager reports them: one running,
// one not started, one waiting for the token nobody gave it yet.
func statusBots(context.Context) ([]bot.BotStatus, error) {
	return []bot.BotStatus{
		{ID: "narrator", State: bot.StateRunning, Telegram: bot.TelegramPolling, OK: true, Today: bot.BotDay{Requests: 12, USD: 0.34}},
		{ID: "painter", State: bot.StateNotStarted, Problem: "the file's problems"},
		{ID: "clock", State: bot.StateNoToken, Problem: "no token: CLOCK_TOKEN is not set"},
	}, nil
}

// serveSocket serves the admin surface of bots on an admin socket, as run
// does, and returns its path.
func serveSocket(t *testing.T, bots func(context.Context) ([]bot.BotStatus, error)) string {
	t.Helper()
	surface := admin.New(admin.Config{Ready: func() error { return nil }, Metrics: http.NotFoundHandler(),
		Status: admin.StatusSource{Bots: bots, Claude: func() admin.ClaudeStatus { return admin.ClaudeStatus{} },
			Instance: "b", Started: time.Now(), Now: time.Now}})
	path := filepath.Join(t.TempDir(), admin.SocketName)
	ln, err := admin.ListenSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	stop := httpserve.Endpoint{Name: "admin socket", Handler: surface.Handler(admin.Socket), Limits: adminLimits}.Serve(ln, zap.NewNop())
	t.Cleanup(stop)
	return path
}

// brainbot status prints the table, and exits 1 naming the bots that do
// not run as their brain files say; 0 when all do.
func TestStatusCommand(t *testing.T) {
	socket := serveSocket(t, statusBots)
	code, stdout, stderr := runMain(t, socketEnv(socket), "status")
	if code != exitError || stderr != "brainbot status: not running as their brain files say: painter\n" {
		t.Errorf("exit %d, stderr %q; want 1 naming painter", code, stderr)
	}
	if !strings.Contains(stdout, "instance b") || !strings.Contains(stdout, "narrator  running                polling") ||
		!strings.Contains(stdout, "clock     waiting for its token") || !strings.Contains(stdout, "no token: CLOCK_TOKEN is not set") {
		t.Errorf("the table:\n%s", stdout)
	}
	code, stdout, _ = runMain(t, socketEnv(socket), "status", "-json")
	if code != exitError || !json.Valid([]byte(stdout)) {
		t.Errorf("-json: exit %d, %q", code, stdout)
	}

	// Running, or waiting for a token never given: as on a new install.
	allRunning := func(ctx context.Context) ([]bot.BotStatus, error) {
		bots, _ := statusBots(ctx)
		return []bot.BotStatus{bots[0], bots[2]}, errors.New("today's usage: NATS is down")
	}
	code, stdout, stderr = runMain(t, socketEnv(serveSocket(t, allRunning)), "status")
	if code != exitOK || stderr != "" || !strings.Contains(stdout, "today's usage: NATS is down") {
		t.Errorf("all running: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
}

// brainbot status says what is wrong when it gets no status: no service,
// or at the address no token or the wrong one.
func TestStatusCommandErrors(t *testing.T) {
	surface := admin.New(admin.Config{Token: "status-token-0123456789", Ready: func() error { return nil }, Metrics: http.NotFoundHandler(),
		Status: admin.StatusSource{Bots: statusBots, Claude: func() admin.ClaudeStatus { return admin.ClaudeStatus{} }, Now: time.Now}})
	srv := httptest.NewServer(surface.Handler(admin.Address))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	none := "BRAINBOT_ADMIN_SOCKET=" + filepath.Join(t.TempDir(), "none.sock")
	for _, tt := range []struct {
		env  []string
		code int
		msg  string
	}{
		{[]string{none}, exitError, "no admin socket at "},
		{[]string{none, "BRAINBOT_HTTP_ADDR=" + addr}, exitError, "no admin socket at "},
		{[]string{none, "BRAINBOT_HTTP_ADDR=" + addr, "BRAINBOT_ADMIN_TOKEN=another-token-of-some-length"}, exitError, "the service refused BRAINBOT_ADMIN_TOKEN"},
		{[]string{none, "BRAINBOT_HTTP_ADDR=" + addr, "BRAINBOT_ADMIN_TOKEN=status-token-0123456789"}, exitError, "not running as their brain files say: painter"},
	} {
		code, _, stderr := runMain(t, tt.env, "status")
		if code != tt.code || !strings.Contains(stderr, tt.msg) {
			t.Errorf("env %q: exit %d, stderr %q; want %d and %q", tt.env, code, stderr, tt.code, tt.msg)
		}
	}
}
