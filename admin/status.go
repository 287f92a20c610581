package admin

// /status: what runs, for an admin. JSON for programs (and `brainbot
// status`, which prints it as a table), a page for a browser.

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
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
	// Pending is what waits in the cluster's stream, not answered yet
	// (nil: not known, NATS does not answer).
	Pending *Pending `json:"pending,omitempty"`
	// NATSUnavailable says why NATS does not answer this instance: the
	// members, the pollers and the figures are not known meanwhile, and
	// nobody polls.
	NATSUnavailable string `json:"nats_unavailable,omitempty"`
	// Error says why the members, the pollers or what is pending could
	// not be read.
	Error string `json:"error,omitempty"`
}

// Pending counts the updates in the cluster's stream not answered
// (acknowledged) yet: all of them, and by bot those of each bot that has
// any. None left is a drained stream, as `brainbot carry` wants it.
type Pending struct {
	Messages uint64            `json:"messages"`
	ByBot    map[string]uint64 `json:"by_bot,omitempty"`
}

// String says what is pending: "none: the stream is drained", or "3
// messages not answered yet (alpha 2, beta 1)".
func (p Pending) String() string {
	if p.Messages == 0 {
		return "none: the stream is drained"
	}
	var bots []string
	for _, b := range slices.Sorted(maps.Keys(p.ByBot)) {
		bots = append(bots, fmt.Sprintf("%s %d", b, p.ByBot[b]))
	}
	s := Counted(int64(p.Messages), "message") + " not answered yet"
	if len(bots) > 0 {
		s += " (" + strings.Join(bots, ", ") + ")"
	}
	return s
}

type ClusterMember struct {
	Name       string `json:"name"`
	Partitions []int  `json:"partitions"`
}

// BotStatus is a bot's status, and in a cluster which instance polls it.
type BotStatus struct {
	bot.BotStatus
	// Today hides the Manager's figures, zero when they could not be
	// read: nil (null) says they are not known (UsageError says why).
	Today    *bot.BotDay `json:"today"`
	PolledBy string      `json:"polled_by,omitempty"`
	// Warm and Spares are the CLI processes this instance keeps for the
	// bot: its conversations' between their messages, and ready for new
	// ones.
	Warm   int `json:"warm_clis"`
	Spares int `json:"spare_clis"`
}

// ClusterView is what /status reads of the cluster this instance is a
// member of: the live members (as the cluster's assignment takes them, so
// that each one's partitions are what it computes itself), the partitions
// a member holds among them, the instance holding a bot's poller lease
// ("": none), what is pending in the stream, and why NATS does not answer
// this instance now ("": it does; known without asking NATS).
type ClusterView interface {
	Partitions() int
	Members(ctx context.Context) ([]string, error)
	Assigned(members []string, member string) []int
	Poller(ctx context.Context, bot string) (instance string, err error)
	Pending(ctx context.Context) (Pending, error)
	Outage() string
}

// TelegramUnpolled is a bot's Telegram while NATS does not answer this
// instance, which does not poll it: its poller lease is in NATS, and no
// instance that lost NATS polls.
const TelegramUnpolled = "nobody polls (NATS unavailable)"

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
	var outage string
	if s.Cluster != nil {
		outage = s.Cluster.Outage()
	}
	bots, err := s.Bots(askUnlessAway(ctx, outage))
	switch {
	case outage != "":
		r.UsageError = "today's usage: not known while " + outage
	case err != nil:
		r.UsageError = err.Error()
	}
	for _, b := range bots {
		st := BotStatus{BotStatus: b}
		if err == nil {
			st.Today = &b.Today
		}
		if s.CLIs != nil {
			st.Warm, st.Spares = s.CLIs(b.ID)
		}
		r.Bots = append(r.Bots, st)
	}
	if s.Cluster != nil {
		r.Cluster = clusterReport(ctx, s.Cluster, r.Bots, outage)
	}
	return r
}

// askUnlessAway is ctx, already ended when NATS is known not to answer
// (outage): the bots' figures are then not asked of it, which would only
// wait for its timeout, and the rest of the status is this process's.
func askUnlessAway(ctx context.Context, outage string) context.Context {
	if outage == "" {
		return ctx
	}
	ctx, cancel := context.WithCancelCause(ctx)
	cancel(errors.New(outage))
	return ctx
}

// clusterReport lists the cluster's members with their partitions and
// what is pending, and has each bot say which instance polls it; during
// an outage (why NATS does not answer) none of it is asked: nobody polls.
func clusterReport(ctx context.Context, c ClusterView, bots []BotStatus, outage string) *ClusterStatus {
	r := &ClusterStatus{Partitions: c.Partitions(), NATSUnavailable: outage}
	if outage != "" {
		for i := range bots {
			if bots[i].State != bot.StateNotStarted && bots[i].Telegram == bot.TelegramStandby {
				bots[i].Telegram = TelegramUnpolled
			}
		}
		return r
	}
	if pending, err := c.Pending(ctx); err != nil {
		r.Error = "pending: " + err.Error()
	} else {
		r.Pending = &pending
	}
	members, err := c.Members(ctx)
	if err != nil {
		r.Error = cmp.Or(r.Error, "members: "+err.Error())
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
	"duration": func(seconds int64) string { return (time.Duration(seconds) * time.Second).String() },
	"join":     joinInts,
	"caps":     formatCaps,
	"today":    formatToday,
	"pending":  formatPending,
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
		if cl.NATSUnavailable != "" {
			fmt.Fprintf(w, "  %s: members, pollers and figures unknown; nobody polls\n", cl.NATSUnavailable)
		}
		fmt.Fprintf(w, "  pending in the stream: %s\n", formatPending(cl.Pending))
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d warm, %d spare\t%s\t%s\n", b.ID, b.State, cmp.Or(telegram, "-"),
			formatWhen(b.LastUpdate), b.Waiting+b.Gathering+b.Parked, b.Warm, b.Spares, formatToday(b.Today), formatCaps(b.Caps))
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

// formatToday is a bot's requests and costs today, "unknown" when they
// could not be read (not zeros: the bot may have spent its cap).
func formatToday(d *bot.BotDay) string {
	if d == nil {
		return "unknown"
	}
	return Counted(d.Requests, "request") + ", " + formatUSD(d.USD)
}

// formatPending is what waits in the cluster's stream, "unknown" when
// NATS did not say.
func formatPending(p *Pending) string {
	if p == nil {
		return "unknown"
	}
	return p.String()
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
