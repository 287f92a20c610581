package main

// /status on the admin address: what runs, for an admin. JSON for
// programs (and `brainbot status`), a page for a browser.

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"brainbot/bot"
	"brainbot/claude"
	"brainbot/state/jetstream"
)

// statusReport is what /status answers.
type statusReport struct {
	Version  string    `json:"version"`
	Revision string    `json:"revision"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
	Uptime   int64     `json:"uptime_seconds"`
	// Claude is this process's CLIs kept between messages and started
	// ahead of new conversations.
	Claude claudeStatus `json:"claude"`
	// Cluster is nil without BRAINBOT_NATS_URL.
	Cluster *clusterStatus `json:"cluster,omitempty"`
	// UsageError says why today's requests and costs are missing.
	UsageError string      `json:"usage_error,omitempty"`
	Bots       []botStatus `json:"bots"`
}

type claudeStatus struct {
	Warm           int    `json:"warm"`
	SparesReady    int    `json:"spares_ready"`
	SparesStarting int    `json:"spares_starting"`
	SparesWanted   int    `json:"spares_wanted"`
	SparesTaken    uint64 `json:"spares_taken"`
	SparesMissed   uint64 `json:"spares_missed"`
}

type clusterStatus struct {
	Partitions int             `json:"partitions"`
	Members    []clusterMember `json:"members"`
	// Error says why the members or the pollers could not be read.
	Error string `json:"error,omitempty"`
}

type clusterMember struct {
	Name       string `json:"name"`
	Partitions []int  `json:"partitions"`
}

// botStatus is a bot's status, and in a cluster which instance polls it.
type botStatus struct {
	bot.BotStatus
	PolledBy string `json:"polled_by,omitempty"`
	// Warm and Spares are the CLI processes this instance keeps for the
	// bot: its conversations' between their messages, and ready for new
	// ones.
	Warm   int `json:"warm_clis"`
	Spares int `json:"spare_clis"`
}

// clusterView is what /status reads of the cluster this instance is a
// member of (state/jetstream's Cluster): the live members (as Assign takes
// them, so that each one's partitions are what it computes itself) and
// the instance holding a bot's poller lease ("": none).
type clusterView interface {
	Partitions() int
	Members(ctx context.Context) ([]string, error)
	Poller(ctx context.Context, bot string) (instance string, err error)
}

// claudeStats reads the driver's CLIs for /status.
func claudeStats(d *claude.Driver) func() claudeStatus {
	return func() claudeStatus {
		s := d.SpareStats()
		return claudeStatus{Warm: d.Warm(), SparesReady: s.Ready, SparesStarting: s.Starting, SparesWanted: s.Wanted,
			SparesTaken: s.Taken, SparesMissed: s.Missed}
	}
}

// statusSource gathers a statusReport.
type statusSource struct {
	bots   func(ctx context.Context) ([]bot.BotStatus, error)
	claude func() claudeStatus
	// clis counts a bot's warm and spare CLIs (nil: none known).
	clis     func(bot string) (warm, spares int)
	started  time.Time
	instance string
	cluster  clusterView // nil: alone
	now      func() time.Time
}

func (s statusSource) report(ctx context.Context) statusReport {
	v, rev := buildVersion()
	now := s.now()
	r := statusReport{Version: v, Revision: rev, Instance: s.instance, Started: s.started,
		Uptime: int64(now.Sub(s.started).Seconds()), Claude: s.claude(), Bots: []botStatus{}}
	bots, err := s.bots(ctx)
	if err != nil {
		r.UsageError = err.Error()
	}
	for _, b := range bots {
		st := botStatus{BotStatus: b}
		if s.clis != nil {
			st.Warm, st.Spares = s.clis(b.ID)
		}
		r.Bots = append(r.Bots, st)
	}
	if s.cluster != nil {
		r.Cluster = clusterReport(ctx, s.cluster, r.Bots)
	}
	return r
}

// clusterReport lists the cluster's members with their partitions, and
// has each bot say which instance polls it.
func clusterReport(ctx context.Context, c clusterView, bots []botStatus) *clusterStatus {
	r := &clusterStatus{Partitions: c.Partitions()}
	members, err := c.Members(ctx)
	if err != nil {
		r.Error = "members: " + err.Error()
	}
	slices.Sort(members)
	for _, m := range members {
		r.Members = append(r.Members, clusterMember{Name: m, Partitions: jetstream.Assign(members, m, r.Partitions)})
	}
	for i := range bots {
		if bots[i].State == bot.StateNotStarted {
			continue
		}
		poller, err := c.Poller(ctx, bots[i].ID)
		if err != nil {
			r.Error = cmp.Or(r.Error, "pollers: "+err.Error())
			continue
		}
		bots[i].PolledBy = poller
	}
	return r
}

// statusHandler serves /status: a page to a browser asking for HTML,
// JSON to everyone else (?format=json or ?format=html choose).
func statusHandler(s statusSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		report := s.report(r.Context())
		w.Header().Set("Cache-Control", "no-store")
		if wantsHTML(r) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = statusPage.Execute(w, report) // a write error: the client left
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	})
}

// wantsHTML: ?format= says, else an Accept header naming text/html (a
// browser's) asks for the page.
func wantsHTML(r *http.Request) bool {
	if f := r.URL.Query().Get("format"); f != "" {
		return f == "html"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

//go:embed status.html
var statusFiles embed.FS

var statusPage = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"when":     formatWhen,
	"usd":      formatUSD,
	"duration": func(seconds int64) string { return (time.Duration(seconds) * time.Second).String() },
	"join":     joinInts,
	"caps":     formatCaps,
}).ParseFS(statusFiles, "status.html"))
