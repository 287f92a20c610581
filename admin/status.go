package admin

// /status: what runs, for an admin. JSON for programs (and `brainbot
// status`, which prints it as a table), a page for a browser.

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"brainbot/bot"
	"brainbot/bot/brain"
)

// StatusReport is what /status answers.
type StatusReport struct {
	Version  string    `json:"version"`
	Revision string    `json:"revision"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
	Uptime   int64     `json:"uptime_seconds"`
	// Claude is this process's CLIs kept between messages and started
	// ahead of new conversations.
	Claude ClaudeStatus `json:"claude"`
	// Cluster is nil without BRAINBOT_NATS_URL.
	Cluster *ClusterStatus `json:"cluster,omitempty"`
	// UsageError says why today's requests and costs are missing.
	UsageError string      `json:"usage_error,omitempty"`
	Bots       []BotStatus `json:"bots"`
}

type ClaudeStatus struct {
	Warm           int    `json:"warm"`
	SparesReady    int    `json:"spares_ready"`
	SparesStarting int    `json:"spares_starting"`
	SparesWanted   int    `json:"spares_wanted"`
	SparesTaken    uint64 `json:"spares_taken"`
	SparesMissed   uint64 `json:"spares_missed"`
}

type ClusterStatus struct {
	Partitions int             `json:"partitions"`
	Members    []ClusterMember `json:"members"`
	// Error says why the members or the pollers could not be read.
	Error string `json:"error,omitempty"`
}

type ClusterMember struct {
	Name       string `json:"name"`
	Partitions []int  `json:"partitions"`
}

// BotStatus is a bot's status, and in a cluster which instance polls it.
type BotStatus struct {
	bot.BotStatus
	PolledBy string `json:"polled_by,omitempty"`
	// Warm and Spares are the CLI processes this instance keeps for the
	// bot: its conversations' between their messages, and ready for new
	// ones.
	Warm   int `json:"warm_clis"`
	Spares int `json:"spare_clis"`
}

// ClusterView is what /status reads of the cluster this instance is a
// member of: the live members (as the cluster's assignment takes them, so
// that each one's partitions are what it computes itself), the partitions
// a member holds among them, and the instance holding a bot's poller
// lease ("": none).
type ClusterView interface {
	Partitions() int
	Members(ctx context.Context) ([]string, error)
	Assigned(members []string, member string) []int
	Poller(ctx context.Context, bot string) (instance string, err error)
}

// StatusSource gathers a StatusReport.
type StatusSource struct {
	Bots   func(ctx context.Context) ([]bot.BotStatus, error)
	Claude func() ClaudeStatus
	// CLIs counts a bot's warm and spare CLIs (nil: none known).
	CLIs              func(bot string) (warm, spares int)
	Version, Revision string
	Started           time.Time
	Instance          string
	Cluster           ClusterView // nil: alone
	Now               func() time.Time
}

func (s StatusSource) report(ctx context.Context) StatusReport {
	now := s.Now()
	r := StatusReport{Version: s.Version, Revision: s.Revision, Instance: s.Instance, Started: s.Started,
		Uptime: int64(now.Sub(s.Started).Seconds()), Claude: s.Claude(), Bots: []BotStatus{}}
	bots, err := s.Bots(ctx)
	if err != nil {
		r.UsageError = err.Error()
	}
	for _, b := range bots {
		st := BotStatus{BotStatus: b}
		if s.CLIs != nil {
			st.Warm, st.Spares = s.CLIs(b.ID)
		}
		r.Bots = append(r.Bots, st)
	}
	if s.Cluster != nil {
		r.Cluster = clusterReport(ctx, s.Cluster, r.Bots)
	}
	return r
}

// clusterReport lists the cluster's members with their partitions, and
// has each bot say which instance polls it.
func clusterReport(ctx context.Context, c ClusterView, bots []BotStatus) *ClusterStatus {
	r := &ClusterStatus{Partitions: c.Partitions()}
	members, err := c.Members(ctx)
	if err != nil {
		r.Error = "members: " + err.Error()
	}
	slices.Sort(members)
	for _, m := range members {
		r.Members = append(r.Members, ClusterMember{Name: m, Partitions: c.Assigned(members, m)})
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
func statusHandler(s StatusSource) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
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
	}
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
	"counted":  Counted[int64],
}).ParseFS(statusFiles, "status.html"))

// WriteStatusTable prints r: the process, the cluster, then a line per
// bot and, below the table, each bot's problems.
func WriteStatusTable(w io.Writer, r StatusReport) {
	fmt.Fprintf(w, "brainbot %s (revision %s), instance %s, up %s\n", r.Version, r.Revision, r.Instance,
		(time.Duration(r.Uptime) * time.Second).String())
	c := r.Claude
	fmt.Fprintf(w, "Claude CLIs: %d warm; spares %d ready, %d starting of %d wanted (%d taken, %d missed)\n",
		c.Warm, c.SparesReady, c.SparesStarting, c.SparesWanted, c.SparesTaken, c.SparesMissed)
	if cl := r.Cluster; cl != nil {
		fmt.Fprintf(w, "Cluster: %d partitions\n", cl.Partitions)
		for _, m := range cl.Members {
			fmt.Fprintf(w, "  %s: partitions %s\n", m.Name, joinInts(m.Partitions))
		}
		if cl.Error != "" {
			fmt.Fprintf(w, "  %s\n", cl.Error)
		}
	}
	if r.UsageError != "" {
		fmt.Fprintln(w, r.UsageError)
	}
	fmt.Fprintln(w)
	if len(r.Bots) == 0 {
		fmt.Fprintln(w, "no bots: the brains folder has no brain files")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BOT\tSTATE\tTELEGRAM\tLAST UPDATE\tWAITING\tCLIS\tTODAY\tCAPS")
	for _, b := range r.Bots {
		telegram := b.Telegram
		if b.PolledBy != "" {
			telegram += " (" + b.PolledBy + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d warm, %d spare\t%s, %s\t%s\n", b.ID, b.State, cmp.Or(telegram, "-"),
			formatWhen(b.LastUpdate), b.Waiting+b.Gathering+b.Parked, b.Warm, b.Spares, Counted(b.Today.Requests, "request"), formatUSD(b.Today.USD), formatCaps(b.Caps))
	}
	_ = tw.Flush() // writes to m.Stdout: nowhere to report a failure
	for _, b := range r.Bots {
		if b.Problem != "" {
			fmt.Fprintf(w, "\n%s:\n  %s\n", b.ID, strings.ReplaceAll(b.Problem, "\n", "\n  "))
		}
	}
}

// formatCaps says a brain's daily caps ("-": none).
func formatCaps(l brain.Limits) string {
	var caps []string
	if l.DailyUSD > 0 {
		caps = append(caps, formatUSD(l.DailyUSD)+" a day")
	}
	if l.PerUserDailyUSD > 0 {
		caps = append(caps, formatUSD(l.PerUserDailyUSD)+" a day per user")
	}
	if l.PerUserPerDay > 0 {
		caps = append(caps, strconv.Itoa(l.PerUserPerDay)+" messages a day per user")
	}
	return cmp.Or(strings.Join(caps, ", "), "-")
}

// formatWhen is a time in UTC to the second ("-" for none).
func formatWhen(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// Counted is n of a noun, in the plural unless one: "1 request", "2
// requests".
func Counted[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(int64(n), 10) + " " + noun + "s"
}

// formatUSD is an amount in USD, cents and below: a request costs cents.
func formatUSD(usd float64) string { return fmt.Sprintf("%.4f USD", usd) }

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}
