package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"brainbot/bot/brain"
)

// status prints what the running service says of its bots (its /status)
// as a table, and fails when a bot does not run as its brain file says:
// an older version running, not started, or its token rejected.
func (m *Main) status(ctx context.Context, args []string) error {
	fs := m.newFlagSet("status", "status [-json] [-http-addr ADDR] [-env-file FILE]\n\n"+
		"Asks the running service at its admin address (BRAINBOT_HTTP_ADDR, with BRAINBOT_ADMIN_TOKEN) what each bot does, and prints it. "+
		"Exits 1 when a bot does not run as its brain file says (an older version running, not started, its token rejected).")
	asJSON := fs.Bool("json", false, "print the service's JSON as it is")
	cfg, err := m.adminConfig(fs, args)
	if err != nil {
		return err
	}
	body, err := askAdmin(ctx, cfg, http.MethodGet, "/status", nil)
	if err != nil {
		return err
	}
	var r statusReport
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s answered /status with something else than brainbot's JSON: %w", cfg.HTTPAddr, err)
	}
	if *asJSON {
		_, err = m.Stdout.Write(body)
	} else {
		writeStatusTable(m.Stdout, r)
	}
	if err != nil {
		return err
	}
	var off []string
	for _, b := range r.Bots {
		if !b.OK {
			off = append(off, b.ID)
		}
	}
	if len(off) > 0 {
		fmt.Fprintf(m.Stderr, "brainbot status: not running as their brain files say: %s\n", strings.Join(off, ", "))
		return errReported
	}
	return nil
}

// adminConfig reads the settings of a command that asks the running
// service at its admin address: BRAINBOT_HTTP_ADDR, which must be set,
// and BRAINBOT_ADMIN_TOKEN. It takes no arguments besides the flags.
func (m *Main) adminConfig(fs *flag.FlagSet, args []string) (Config, error) {
	cfg, err := m.loadConfig(fs, args, settingsNamed("BRAINBOT_HTTP_ADDR"))
	if err != nil {
		return cfg, usageError{err}
	}
	if fs.NArg() != 0 {
		return cfg, usageError{fmt.Errorf("want no arguments, got %q", fs.Args())}
	}
	if cfg.HTTPAddr == "" {
		return cfg, usageError{fmt.Errorf("%s is not set: this command asks the service at its admin address", lookupSetting("BRAINBOT_HTTP_ADDR").name())}
	}
	return cfg, nil
}

// askAdmin calls path, with query (may be nil), on the running service's
// admin address (cfg.HTTPAddr, with cfg.AdminToken) and returns the
// answer's body; its errors say what to do.
func askAdmin(ctx context.Context, cfg Config, method, path string, query url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	addr, token := cfg.HTTPAddr, cfg.AdminToken
	target := "http://" + dialable(addr) + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s %q: %w", lookupSetting("BRAINBOT_HTTP_ADDR").name(), addr, err)}
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no answer from brainbot at %s (%s): is the service running, with this admin address? %w",
			target, lookupSetting("BRAINBOT_HTTP_ADDR").name(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", target, err)
	}
	msg := strings.TrimSpace(string(body))
	switch {
	case resp.StatusCode == http.StatusUnauthorized && token == "":
		return nil, errors.New("the admin address asks for a token: set BRAINBOT_ADMIN_TOKEN to the service's (its environment file has it)")
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, errors.New("the service refused BRAINBOT_ADMIN_TOKEN: it is not the one the service runs with")
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(msg, "no such"):
		return nil, errors.New(msg) // the call's own answer: nothing of that name
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%s: not found: the service is a brainbot older than this command, or not brainbot", target)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s: %s: %s", target, resp.Status, msg)
	}
	return body, nil
}

// dialable is the address to reach a listen address at: on every
// interface (":9464", "0.0.0.0:9464", "[::]:9464") it is this machine's
// loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr // the request says what is wrong with it
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// writeStatusTable prints r: the process, the cluster, then a line per
// bot and, below the table, each bot's problems.
func writeStatusTable(w io.Writer, r statusReport) {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d warm, %d spare\t%d requests, %s\t%s\n", b.ID, b.State, cmp.Or(telegram, "-"),
			formatWhen(b.LastUpdate), b.Waiting+b.Gathering+b.Parked, b.Warm, b.Spares, b.Today.Requests, formatUSD(b.Today.USD), formatCaps(b.Caps))
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

// formatUSD is an amount in USD, cents and below: a request costs cents.
func formatUSD(usd float64) string { return fmt.Sprintf("%.4f USD", usd) }

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}
