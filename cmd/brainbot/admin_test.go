package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"brainbot/admin"
	"brainbot/bot"
	"brainbot/claude"
	"brainbot/httpserve"
	"brainbot/state/sqlite"
)

// Both endpoints bound every resource a client can hold.
func TestEndpointsHaveLimits(t *testing.T) {
	for name, l := range map[string]httpserve.Limits{"admin": adminLimits, "webhook": webhookLimits} {
		if l.ReadHeader <= 0 || l.Read <= 0 || l.Write <= 0 || l.Idle <= 0 || l.MaxHeaderBytes <= 0 || l.MaxConns <= 0 || l.MaxClientConns <= 0 {
			t.Errorf("%s: limits %+v, want every one set", name, l)
		}
		if l.MaxClientConns*2 > l.MaxConns {
			t.Errorf("%s: one client may hold %d of %d connections, want it far from all", name, l.MaxClientConns, l.MaxConns)
		}
	}
}

// Slow clients that hold half-sent requests on more connections than an
// endpoint used to take at once in all do not keep it from answering
// another client: /healthz stalled 9 s, a webhook call as long. The slow
// clients hold for the whole test (the header deadline is long here), so
// the answer comes while they hold, or never.
func TestEndpointsAnswerWhileSlowClientsHold(t *testing.T) {
	surface := admin.New(admin.Config{Ready: func() error { return nil }, Metrics: http.NotFoundHandler()})
	for _, e := range []httpserve.Endpoint{
		{Name: "admin endpoint", Handler: surface.Handler(admin.Address), Limits: adminLimits},
		{Name: "webhook endpoint", Handler: newWebhookHandler(t), Limits: webhookLimits},
	} {
		t.Run(e.Name, func(t *testing.T) {
			e.Limits.ReadHeader, e.Limits.Read = time.Hour, time.Hour
			core, logs := observer.New(zap.InfoLevel)
			stop, err := e.ListenAndServe("127.0.0.1:0", zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			addr := logs.FilterMessage(e.Name + " listening").All()[0].ContextMap()["addr"].(string)

			// Another client than the one asking below: 127.0.0.2 is
			// loopback too.
			slow := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: time.Minute}
			// More than either endpoint used to accept at once in all
			// (64 and 512), from one client.
			const n = 520
			for range n {
				conn, err := slow.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if _, err := fmt.Fprintf(conn, "POST /bot HTTP/1.1\r\nHost: %s\r\nContent-Type: appl", addr); err != nil {
					t.Fatal(err)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on the stall
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("while %d slow clients held connections, another client got no answer: %v", n, err)
			}
			resp.Body.Close()
		})
	}
}

// idleClients is how many connections the attack below opens: what held
// as many descriptors as long as the client liked before the endpoints
// had limits.
const idleClients = 3000

// An unauthenticated client opens thousands of keep-alive connections to
// the webhook endpoint, sends each a GET (answered 405) and leaves them
// idle. Each is closed after the idle timeout, or refused at once while
// the client holds its share, and the process never holds more of them at
// once than the endpoint's connection limit: the descriptors it has open,
// counted whenever a call is served, stay within that bound.
func TestWebhookEndpointClosesIdleConnections(t *testing.T) {
	webhook := newWebhookHandler(t)
	baseline := openDescriptors(t)
	var (
		mu   sync.Mutex // one count at a time: each opens /proc/self/fd
		peak int
	)
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peak = max(peak, openDescriptors(t))
		mu.Unlock()
		webhook.ServeHTTP(w, r)
	})
	e := httpserve.Endpoint{Name: "webhook endpoint", Handler: counting, Limits: webhookLimits}
	// Shorter than in service, so the test takes seconds.
	e.Limits.Idle = 200 * time.Millisecond
	e.Limits.MaxConns = 300
	core, logs := observer.New(zap.InfoLevel)
	stop, err := e.ListenAndServe("127.0.0.1:0", zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	addr := logs.FilterMessage("webhook endpoint listening").All()[0].ContextMap()["addr"].(string)

	// The client is another process, so its own descriptors are not
	// counted as the endpoint's.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	client.Env = append(os.Environ(), idleClientEnv+"="+addr+","+strconv.Itoa(idleClients))
	client.Stderr = os.Stderr
	out, err := client.Output()
	if err != nil {
		t.Fatalf("idle client: %v: %s", err, out)
	}
	var got idleClientReport
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("idle client said %q: %v", out, err)
	}
	if got.Answered405+got.Refused != idleClients || got.ClosedByServer != got.Answered405 || got.Answered405 < e.Limits.MaxConns {
		t.Errorf("of %d idle connections, %d got 405, %d were closed by the endpoint after, %d refused (first error: %s); "+
			"want each answered and closed or refused, and at least the connection limit (%d) answered",
			idleClients, got.Answered405, got.ClosedByServer, got.Refused, got.FirstError, e.Limits.MaxConns)
	}
	// The connections themselves, the listener, and a few the runtime
	// opens meanwhile.
	mu.Lock()
	held := peak - baseline
	mu.Unlock()
	t.Logf("at most %d descriptors more than before the attack (connection limit %d)", held, e.Limits.MaxConns)
	if held > e.Limits.MaxConns+16 {
		t.Errorf("the process held %d more descriptors than before the attack, want at most about %d (the connection limit)", held, e.Limits.MaxConns)
	}
}

// newWebhookHandler is the webhook handler of a Manager with no bots.
func newWebhookHandler(t *testing.T) http.Handler {
	t.Helper()
	data := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m, err := bot.New(bot.Config{BrainsDir: t.TempDir(), DataDir: data, Claude: noModel{}, State: db})
	if err != nil {
		t.Fatal(err)
	}
	return m.WebhookHandler()
}

// noModel is a Claude the webhook never reaches.
type noModel struct{}

func (noModel) Run(context.Context, claude.Request) (*claude.Result, error) {
	return nil, errors.New("no model in this test")
}
func (noModel) Interrupt(string) bool                  { return false }
func (noModel) End(string)                             {}
func (noModel) SessionFile(bot, session string) string { return "" }

// openDescriptors counts the process's open file descriptors.
func openDescriptors(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Error(err)
	}
	return len(entries)
}

// idleClientEnv, set to "host:port,n", makes the test binary the idle
// client (runIdleClientIfRequested).
const idleClientEnv = "BRAINBOT_TEST_IDLE_CLIENT"

type idleClientReport struct {
	Answered405, ClosedByServer int
	Refused                     int // closed by the server before any answer
	FirstError                  string
}

// runIdleClientIfRequested, in a test binary started with idleClientEnv,
// opens n connections to the address, sends a GET on each, reads the
// answer and then waits for the server to close the connection; it prints
// what it saw as JSON and exits.
func runIdleClientIfRequested() {
	spec, ok := os.LookupEnv(idleClientEnv)
	if !ok {
		return
	}
	addr, count, _ := strings.Cut(spec, ",")
	n, _ := strconv.Atoi(count)
	var (
		mu     sync.Mutex
		report idleClientReport
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(90 * time.Second)
	for range n {
		wg.Go(func() {
			answered, closed, err := idleConnection(addr, deadline)
			mu.Lock()
			defer mu.Unlock()
			if answered {
				report.Answered405++
			}
			if closed {
				report.ClosedByServer++
			}
			if errors.Is(err, errRefused) {
				report.Refused++
				return
			}
			if err != nil && report.FirstError == "" {
				report.FirstError = err.Error()
			}
		})
	}
	wg.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(report)
	os.Exit(0)
}

// errRefused is a connection the server closed before it answered.
var errRefused = errors.New("closed before an answer")

// idleConnection is one connection of the idle client.
func idleConnection(addr string, deadline time.Time) (answered405, closedByServer bool, err error) {
	conn, err := net.DialTimeout("tcp", addr, time.Until(deadline))
	if err != nil {
		return false, false, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	if _, err := fmt.Fprintf(conn, "GET /bot HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		return false, false, err
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		return false, false, errRefused
	}
	if err != nil {
		return false, false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	answered405 = resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Connection") != "close"
	// Keep-alive: nothing more comes until the server closes.
	_, err = r.ReadByte()
	if errors.Is(err, io.EOF) {
		return answered405, true, nil
	}
	return answered405, false, fmt.Errorf("waiting for the server to close: %w", err)
}
