package main

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// /readyz answers 503 naming what is not ready, and the endpoint says where
// it listens.
func TestAdminEndpoint(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	notReady := func() error { return errors.New("not polling Telegram: voice") }
	stop, err := serveAdmin("127.0.0.1:0", http.NotFoundHandler(), notReady, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	addr := logs.FilterMessage("admin endpoint listening").All()[0].ContextMap()["addr"].(string)
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "voice") {
		t.Errorf("/readyz = %d %q, want 503 naming the bot", resp.StatusCode, body)
	}
	if _, err := serveAdmin(addr, http.NotFoundHandler(), notReady, zap.NewNop()); err == nil {
		t.Error("a second endpoint on a taken address started")
	}
}
