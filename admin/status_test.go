package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"brainbot/bot"
	"brainbot/bot/brain"
	"brainbot/bot/intake"
	"brainbot/state/jetstream"
)

const statusToken = "status-token-0123456789"

var statusStart = time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC)

// statusBots are three bots as the Manager reports them: one running,
// one running an older version of its broken file, one not started.
func statusBots(context.Context) ([]bot.BotStatus, error) {
	return []bot.BotStatus{
		{ID: "narrator", File: "/etc/brainbot/brains/narrator.yaml", State: bot.StateRunning, Telegram: bot.TelegramPolling, OK: true,
			Backlog: intake.Backlog{Waiting: 2, Answering: 1, Gathering: 3, LastUpdate: statusStart.Add(time.Hour)},
			Today:   bot.BotDay{Requests: 12, USD: 0.34}, Caps: brain.Limits{DailyUSD: 5, PerUserPerDay: 20}},
		{ID: "voice", File: "/etc/brainbot/brains/voice.yaml", State: bot.StateOlder, Telegram: bot.TelegramStandby,
			Problem: "/etc/brainbot/brains/voice.yaml:7: tts.speed: must be between 0.25 and 4.0, got 9 <b>"},
		{ID: "painter", State: bot.StateNotStarted, Problem: "no token: PAINTER_TOKEN is not set"},
	}, nil
}

// fakeCluster lists its members, a, b and c, who polls each bot, and
// what is pending; with outage, NATS does not answer and every call fails.
type fakeCluster struct {
	pollers map[string]string
	pending Pending
	outage  string
}

func (f fakeCluster) Pending(context.Context) (Pending, error) {
	if f.outage != "" {
		return Pending{}, errors.New("nats: timeout")
	}
	return f.pending, nil
}
func (f fakeCluster) Outage() string { return f.outage }

func (fakeCluster) Partitions() int                           { return 8 }
func (fakeCluster) Members(context.Context) ([]string, error) { return []string{"c", "a", "b"}, nil }
func (fakeCluster) Assigned(members []string, member string) []int {
	return jetstream.Assign(members, member, 8)
}
func (f fakeCluster) Poller(_ context.Context, bot string) (string, error) {
	return f.pollers[bot], nil
}

func testStatusSource(cluster ClusterView) StatusSource {
	clis := func(bot string) (int, int) {
		if bot == "narrator" {
			return 2, 1
		}
		return 0, 0
	}
	return StatusSource{Bots: statusBots, CLIs: clis, Started: statusStart, Instance: "b", Cluster: cluster,
		Version: "v1.2.3", Revision: "abcdef",
		Now:    func() time.Time { return statusStart.Add(90 * time.Minute) },
		Claude: func() ClaudeStatus { return ClaudeStatus{Warm: 3, SparesReady: 2, SparesWanted: 3, SparesTaken: 7} }}
}

// serveStatus serves the admin address with /status behind statusToken,
// and returns it.
func serveStatus(t *testing.T, s StatusSource) string {
	t.Helper()
	surface := New(Config{Token: statusToken, Ready: func() error { return nil }, Metrics: http.NotFoundHandler(), Status: s})
	srv := httptest.NewServer(surface.Handler(Address))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func getStatus(t *testing.T, url, accept, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// /status answers JSON to programs: the process, the cluster's members
// with the partitions each holds, and each bot with who polls it.
func TestStatusJSON(t *testing.T) {
	addr := serveStatus(t, testStatusSource(fakeCluster{pollers: map[string]string{"narrator": "b", "voice": "c"}}))
	for _, ask := range []struct{ query, accept string }{
		{"", ""}, {"", "*/*"}, {"", "application/json"}, {"?format=json", "text/html"},
	} {
		resp, body := getStatus(t, "http://"+addr+"/status"+ask.query, ask.accept, statusToken)
		var r StatusReport
		if err := json.Unmarshal([]byte(body), &r); err != nil || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%q with Accept %q: %s %q, %v; want JSON", ask.query, ask.accept, resp.Header.Get("Content-Type"), body, err)
		}
	}
	_, body := getStatus(t, "http://"+addr+"/status", "", statusToken)
	var r StatusReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if r.Instance != "b" || r.Uptime != 5400 || r.Version == "" || r.Revision == "" || r.Claude.Warm != 3 || r.Claude.SparesTaken != 7 {
		t.Errorf("process: %+v", r)
	}
	if len(r.Bots) != 3 || r.Bots[0].ID != "narrator" || r.Bots[0].PolledBy != "b" || r.Bots[1].PolledBy != "c" || r.Bots[2].PolledBy != "" {
		t.Errorf("bots: %+v, want narrator polled by b, voice by c, painter by none", r.Bots)
	}
	if n := r.Bots[0]; !n.OK || n.Warm != 2 || n.Spares != 1 || n.Waiting != 2 || n.Gathering != 3 || n.Today.Requests != 12 || n.Caps.DailyUSD != 5 || !n.LastUpdate.Equal(statusStart.Add(time.Hour)) {
		t.Errorf("narrator: %+v", n)
	}
	for _, want := range []string{`"state": "running an older version"`, `"problem": "/etc/brainbot/brains/voice.yaml:7: tts.speed`, `"daily_usd": 5`, `"last_update": "2026-11-27T06:00:00Z"`, `"gathering": 3`} {
		if !strings.Contains(body, want) {
			t.Errorf("JSON lacks %s:\n%s", want, body)
		}
	}
	var held []int
	for _, m := range r.Cluster.Members {
		if !slices.Equal(m.Partitions, jetstream.Assign([]string{"a", "b", "c"}, m.Name, 8)) {
			t.Errorf("member %s holds %v, want what Assign gives it", m.Name, m.Partitions)
		}
		held = append(held, m.Partitions...)
	}
	slices.Sort(held)
	if r.Cluster.Partitions != 8 || len(r.Cluster.Members) != 3 || !slices.Equal(held, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("cluster: %+v, want a, b and c holding the 8 partitions between them", r.Cluster)
	}
}

// A browser asking for HTML gets a page readable on a phone, without
// JavaScript, every bot with its state, its problems escaped.
func TestStatusPage(t *testing.T) {
	addr := serveStatus(t, testStatusSource(nil))
	resp, page := getStatus(t, "http://"+addr+"/status", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", statusToken)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`<meta name="viewport" content="width=device-width, initial-scale=1">`,
		`narrator: <span class="state">running</span>`,
		`voice: <span class="state">running an older version</span>`,
		`painter: <span class="state">not started</span>`,
		`voice.yaml:7: tts.speed: must be between 0.25 and 4.0, got 9 &lt;b&gt;`,
		"no token: PAINTER_TOKEN is not set",
		"12 requests, 0.3400 USD", "5.0000 USD a day, 20 messages a day per user",
		"2 queued, 1 answered now, 3 in albums still arriving", "2026-11-27 06:00:00 UTC", "1h30m0s",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "Cluster") {
		t.Errorf("the page has a script, or a cluster alone:\n%s", page)
	}
}

// /status is behind the admin token like the rest of the endpoint.
func TestStatusAsksForTheAdminToken(t *testing.T) {
	addr := serveStatus(t, testStatusSource(nil))
	for _, token := range []string{"", "another-token-of-some-length"} {
		resp, body := getStatus(t, "http://"+addr+"/status", "text/html", token)
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "narrator") {
			t.Errorf("token %q: %d %q, want 401 and nothing of the status", token, resp.StatusCode, body)
		}
	}
}

// The table brainbot status prints: the process, the cluster, a line a
// bot, and each bot's problems below.
func TestStatusTable(t *testing.T) {
	var b strings.Builder
	r := testStatusSource(fakeCluster{pollers: map[string]string{"narrator": "b", "voice": "c"},
		pending: Pending{Messages: 3, ByBot: map[string]uint64{"voice": 1, "narrator": 2}}}).report(context.Background())
	WriteStatusTable(&b, r)
	stdout := b.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^brainbot .+ \(revision .+\), instance b, up 1h30m0s$`),
		regexp.MustCompile(`(?m)^Claude CLIs: 3 warm; spares 2 ready, 0 starting of 3 wanted \(7 taken, 0 missed\)$`),
		regexp.MustCompile(`(?m)^Cluster: 8 partitions$`),
		regexp.MustCompile(`(?m)^  pending in the stream: 3 messages not answered yet \(narrator 2, voice 1\)$`),
		regexp.MustCompile(`(?m)^BOT +STATE +TELEGRAM +LAST UPDATE +WAITING +CLIS +TODAY +CAPS$`),
		regexp.MustCompile(`(?m)^narrator +running +polling \(b\) +2026-11-27 06:00:00 UTC +5 +2 warm, 1 spare +12 requests, 0.3400 USD +5.0000 USD a day, 20 messages a day per user$`),
		regexp.MustCompile(`(?m)^voice +running an older version +standby \(c\) +- +0 +0 warm, 0 spare +0 requests, 0.0000 USD +-$`),
		regexp.MustCompile(`(?m)^painter +not started +- +- +0 +0 warm, 0 spare +0 requests, 0.0000 USD +-$`),
		regexp.MustCompile(`(?m)^voice:\n  /etc/brainbot/brains/voice.yaml:7: tts.speed: must be between 0.25 and 4.0, got 9 <b>$`),
		regexp.MustCompile(`(?m)^painter:\n  no token: PAINTER_TOKEN is not set$`),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("the table does not match %s:\n%s", want, stdout)
		}
	}

}

func TestCounted(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 requests"}, {1, "1 request"}, {2, "2 requests"}} {
		if got := Counted(c.n, "request"); got != c.want {
			t.Errorf("Counted(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// During a NATS outage the status says that nobody polls the bots this
// instance does not poll, and that today's figures and what is pending
// are unknown: not standby with zeros, as if all were well and idle.
func TestStatusDuringAnOutage(t *testing.T) {
	src := testStatusSource(fakeCluster{outage: "NATS JetStream unavailable for 12s (connection: nats: connection closed): messages wait for it"})
	src.Bots = func(ctx context.Context) ([]bot.BotStatus, error) {
		bots, _ := statusBots(ctx)
		for i := range bots {
			bots[i].Today = bot.BotDay{} // what the Manager gives when it cannot read them
		}
		return bots, errors.New("today's usage: usage stream: nats: timeout")
	}
	addr := serveStatus(t, src)
	_, body := getStatus(t, "http://"+addr+"/status", "", statusToken)
	var raw struct {
		Cluster map[string]any   `json:"cluster"`
		Bots    []map[string]any `json:"bots"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, b := range raw.Bots {
		if today, ok := b["today"]; !ok || today != nil {
			t.Errorf("%s today: %v, want null (unknown)", b["name"], today)
		}
	}
	if raw.Bots[1]["telegram"] != TelegramUnpolled || raw.Bots[0]["telegram"] != bot.TelegramPolling {
		t.Errorf("telegram: %v and %v, want voice unpolled, narrator still polling here", raw.Bots[1]["telegram"], raw.Bots[0]["telegram"])
	}
	if _, known := raw.Cluster["pending"]; known || !strings.Contains(fmt.Sprint(raw.Cluster["nats_unavailable"]), "unavailable for 12s") {
		t.Errorf("cluster %v, want NATS unavailable and nothing pending known", raw.Cluster)
	}

	var table strings.Builder
	WriteStatusTable(&table, src.report(context.Background()))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  NATS JetStream unavailable for 12s .*: members, pollers and figures unknown; nobody polls$`),
		regexp.MustCompile(`(?m)^  pending in the stream: unknown$`),
		regexp.MustCompile(`(?m)^voice +running an older version +nobody polls \(NATS unavailable\) +- +0 +0 warm, 0 spare +unknown +-$`),
		regexp.MustCompile(`(?m)^narrator +running +polling .* unknown +5.0000 USD a day`),
	} {
		if !want.MatchString(table.String()) {
			t.Errorf("the table does not match %s:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), "0 requests") {
		t.Errorf("the table counts zeros it does not know:\n%s", table.String())
	}
	_, page := getStatus(t, "http://"+addr+"/status", "text/html", statusToken)
	for _, want := range []string{"<dt>Today</dt><dd>unknown</dd>", "nobody polls (NATS unavailable)", "<dt>Pending in the stream</dt><dd>unknown</dd>",
		"members, pollers and figures unknown; nobody polls"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}
