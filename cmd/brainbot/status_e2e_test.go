package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"brainbot/admin"
	"brainbot/bot"
	"brainbot/bot/telegramtest"
	"brainbot/claude/claudetest"
	"brainbot/cmd/internal/stack"
)

// An admin's window onto the service: /status says each bot runs its
// brain file, polling, and what it did today; a broken edit of the file
// shows as the older version running, with file:line, on the JSON, the
// page a browser renders and `brainbot status`, which then exits 1.
func TestEndToEndStatus(t *testing.T) {
	s := startStack(t, stack.Config{
		Brainbot: brainbotBinary(t), ClaudeCmd: claudetest.RequireCLI(t), Dir: t.TempDir(),
		// unset.yaml is a brain installed before its bot is configured.
		Brains: map[string]string{"narrator.yaml": narratorBrain, "speaker.yaml": speakerBrain,
			"unset.yaml": "name: Unset\nsystem_prompt: Hi.\ntelegram:\n  token_env: UNSET_BOT_TOKEN_NOBODY_SET\n"},
		// A browser signs in with the admin token: the address serves
		// the admin nothing without it.
		Env:  []string{"BRAINBOT_HTTP_ADDR=127.0.0.1:0", "BRAINBOT_ADMIN_TOKEN=" + statusE2EToken},
		Logs: testLogs(t),
	}, nil)
	socket := adminSocket(t, s)
	signIn := "http://" + adminAddr(t, s) + "/login?token=" + statusE2EToken
	wantText(t, ask(t, s, "narrator", 101, "hello there"))

	narrator := waitStatus(t, socket, "narrator", func(b admin.BotStatus) bool { return b.Today.Requests == 1 })
	if !narrator.OK || narrator.State != bot.StateRunning || narrator.Telegram != bot.TelegramPolling ||
		narrator.File != filepath.Join(s.BrainsDir, "narrator.yaml") || narrator.LastUpdate.IsZero() || narrator.Today.USD <= 0 {
		t.Errorf("narrator = %+v, want running its file, polling, with today's request and cost", narrator)
	}
	if code, out := statusCommand(t, socket); code != 0 || !strings.Contains(out, "narrator  running  ") || !strings.Contains(out, "unset     waiting for its token") {
		t.Errorf("brainbot status = exit %d:\n%s\nwant 0, narrator running and unset waiting for its token", code, out)
	}
	page := browserDOM(t, signIn)
	for _, want := range []string{`narrator: <span class="state">running</span>`, `speaker: <span class="state">running</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page the browser rendered lacks %q:\n%s", want, page)
		}
	}

	mark := s.Logs().Len()
	if err := s.WriteBrain("narrator.yaml", narratorBrain+"tts:\n  speed: 9\n"); err != nil {
		t.Fatal(err)
	}
	waitLogFrom(t, s, mark, func(l stack.Line) bool { return l.Msg == "brain file has problems; keeping the last good version" })
	problem := filepath.Join(s.BrainsDir, "narrator.yaml") + ":7: tts.speed: must be between 0.25 and 4.0, got 9"
	narrator = waitStatus(t, socket, "narrator", func(b admin.BotStatus) bool { return b.State == bot.StateOlder })
	if narrator.OK || narrator.Problem != problem || narrator.Telegram != bot.TelegramPolling {
		t.Errorf("narrator = %+v, want the older version polling, its problem %q", narrator, problem)
	}
	code, out := statusCommand(t, socket)
	if code != exitError || !strings.Contains(out, "narrator  running an older version  ") || !strings.Contains(out, problem) ||
		!strings.Contains(out, "not running as their brain files say: narrator") {
		t.Errorf("brainbot status = exit %d:\n%s\nwant 1, naming narrator and its problem", code, out)
	}
	page = browserDOM(t, signIn)
	for _, want := range []string{`narrator: <span class="state">running an older version</span>`, problem, `speaker: <span class="state">running</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page the browser rendered lacks %q:\n%s", want, page)
		}
	}
	// The older version answers on.
	if got := wantText(t, ask(t, s, "narrator", 101, "still there?")); got != "You said: still there? (message 2)" {
		t.Errorf("reply = %q", got)
	}
}

// adminAddr is where brainbot serves its admin endpoint.
func adminAddr(t *testing.T, s *stack.Stack) string {
	t.Helper()
	admin := s.Logs().Find(0, func(l stack.Line) bool { return l.Msg == "admin endpoint listening" })
	if len(admin) == 0 {
		t.Fatal("no admin endpoint log line")
	}
	return admin[len(admin)-1].Str("addr")
}

// statusE2EToken is the admin token of the status page's test.
const statusE2EToken = "status-e2e-admin-token-0123456789"

// waitStatus waits until /status, asked through the admin socket, says
// of bot what done wants, and returns it.
func waitStatus(t *testing.T, socket, name string, done func(admin.BotStatus) bool) admin.BotStatus {
	t.Helper()
	var last admin.BotStatus
	for deadline := time.Now().Add(waitLong); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, body := socketCall(t, socket, http.MethodGet, "/status", "", nil)
		var r admin.StatusReport
		if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
			t.Fatalf("/status = %d %q: %v", code, body, err)
		}
		for _, b := range r.Bots {
			if b.ID == name {
				if last = b; done(b) {
					return b
				}
			}
		}
	}
	t.Fatalf("/status never said what was awaited of %s; last %+v", name, last)
	return last
}

// statusCommand runs `brainbot status` through the admin socket: its exit
// code and output (stdout, then stderr).
func statusCommand(t *testing.T, socket string) (int, string) {
	t.Helper()
	cmd := exec.Command(brainbotBinary(t), "status")
	cmd.Env = socketEnv(socket)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// browserDOM is the DOM a real headless browser (Debian's chromium)
// renders of url. Without chromium the test is skipped, unless on CI
// (CI=true), where .ci/run installs it.
func browserDOM(t *testing.T, url string) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is missing on CI: .ci/run installs it (apt-get install chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium): the page is not checked in a browser")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, stderr.String())
	}
	return string(out)
}

// In a cluster, /status on each instance says which instance polls each
// bot and which partitions each holds: between them, every bot is polled
// by exactly one instance, which names itself, and the partitions are
// held once each.
func TestClusterStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two brainbot processes")
	}
	bots := []string{"alpha", "beta", "gamma"}
	c := newCluster(t, bots, 0)
	ins := []*instance{c.start("s0", "BRAINBOT_HTTP_ADDR=127.0.0.1:0"), c.start("s1", "BRAINBOT_HTTP_ADDR=127.0.0.1:0")}
	var last []admin.StatusReport
	settled := func() bool {
		last = last[:0]
		polled, held := map[string]int{}, map[int]int{}
		for _, in := range ins {
			code, body := adminGet(t, in, "/status?format=json")
			var r admin.StatusReport
			if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
				t.Fatalf("%s /status = %d %q: %v", in.name, code, body, err)
			}
			last = append(last, r)
			if r.Instance != in.name || r.Cluster == nil || r.Cluster.Partitions != 8 || len(r.Bots) != len(bots) {
				return false
			}
			for _, m := range r.Cluster.Members {
				if m.Name == in.name {
					for _, p := range m.Partitions {
						held[p]++
					}
				}
			}
			for _, b := range r.Bots {
				switch {
				case b.Telegram == bot.TelegramPolling && b.PolledBy == in.name:
					polled[b.ID]++
				case b.Telegram != bot.TelegramStandby || b.PolledBy == in.name:
					return false
				}
			}
		}
		for p := range 8 {
			if held[p] != 1 {
				return false
			}
		}
		for _, id := range bots {
			if polled[id] != 1 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(waitLong); !settled(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the instances' /status never agreed on who polls each bot and holds each partition: %+v", last)
		}
	}
}

// `brainbot status` says what waits in the cluster's stream, not answered
// yet (a reply Telegram has not confirmed), and when it is drained. During
// a NATS outage it says that nobody polls and that today's figures and
// what is pending are unknown, not standby with zeros.
func TestClusterStatusPendingOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a brainbot process")
	}
	c := newCluster(t, []string{"alpha"}, 0)
	in := c.start("i0")
	socket := instanceAdminSocket(t, in)
	token := stack.Token("alpha")
	release := c.tg.Hold(token, "sendMessage")
	const user = 6161
	c.tg.SendText(token, user, user, "hello")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := c.tg.WaitCall(ctx, token, func(call telegramtest.Call) bool { return call.Method == "sendMessage" }); err != nil {
		t.Fatal(err)
	}
	report := func() (admin.StatusReport, string) {
		code, body := socketCall(t, socket, http.MethodGet, "/status", "", nil)
		var r admin.StatusReport
		if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil || r.Cluster == nil {
			t.Fatalf("/status = %d %q: %v", code, body, err)
		}
		return r, body
	}
	if r, body := report(); r.Cluster.Pending == nil || r.Cluster.Pending.Messages != 1 || r.Cluster.Pending.ByBot["alpha"] != 1 {
		t.Errorf("/status with a reply held: %s, want one message of alpha pending", body)
	}
	if _, table := statusCommand(t, socket); !strings.Contains(table, "pending in the stream: 1 message not answered yet (alpha 1)") {
		t.Errorf("brainbot status with a reply held:\n%s", table)
	}
	release()
	for deadline := time.Now().Add(waitLong); ; time.Sleep(50 * time.Millisecond) {
		r, body := report()
		if r.Cluster.Pending != nil && r.Cluster.Pending.Messages == 0 && len(r.Bots) == 1 && r.Bots[0].Today != nil && r.Bots[0].Today.Requests == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/status never said the stream is drained and the request counted: %s", body)
		}
	}
	if _, table := statusCommand(t, socket); !strings.Contains(table, "pending in the stream: none: the stream is drained") {
		t.Errorf("brainbot status once answered:\n%s", table)
	}

	c.server.Stop()
	defer c.server.Restart()
	c.waitLog(in, waitLong, "the outage noticed", msgStarts("NATS unavailable"), 1)
	c.waitLog(in, waitLong, "polling stopped", msgStarts("poller lease lost"), 1)
	asked := time.Now()
	_, body := report()
	t.Logf("/status during the outage answered in %v", time.Since(asked).Round(time.Millisecond))
	var raw struct {
		Cluster map[string]any   `json:"cluster"`
		Bots    []map[string]any `json:"bots"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil || len(raw.Bots) != 1 {
		t.Fatalf("%s: %v", body, err)
	}
	if b := raw.Bots[0]; b["today"] != nil || b["telegram"] != admin.TelegramUnpolled || raw.Cluster["nats_unavailable"] == nil || raw.Cluster["pending"] != nil {
		t.Errorf("/status during the outage: %s, want nobody polling, today and pending unknown", body)
	}
	_, table := statusCommand(t, socket)
	for _, want := range []string{"nobody polls (NATS unavailable)", "unknown", "pending in the stream: unknown"} {
		if !strings.Contains(table, want) {
			t.Errorf("brainbot status during the outage lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "0 requests") || strings.Contains(table, "standby") {
		t.Errorf("brainbot status during the outage says standby or zeros:\n%s", table)
	}
}
