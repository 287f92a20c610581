package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"brainbot/cmd/internal/stack"
)

// adminSocket is where s serves its admin socket.
func adminSocket(t testing.TB, s *stack.Stack) string {
	t.Helper()
	lines := s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "admin socket listening" })
	if len(lines) == 0 {
		t.Fatal("no admin socket log line")
	}
	return lines[len(lines)-1].Str("addr")
}

// socketEnv is the environment of an admin's command on the service's
// machine: where the admin socket is.
func socketEnv(socket string) []string { return []string{"BRAINBOT_ADMIN_SOCKET=" + socket} }

// socketCall makes a call through the admin socket at socket, as the
// admin's commands (or a browser through an ssh tunnel) do, with the Host
// and headers given: its status and body.
func socketCall(t testing.TB, socket, method, path, host string, header map[string]string) (int, string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://localhost"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
