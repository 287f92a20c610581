package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"brainbot/state"
	"brainbot/state/jetstream"
)

// usage prints what the bots cost: requests by mode, tokens, USD and
// errors per brain (and per user), from the usage records brainbot run
// keeps in the state database (with BRAINBOT_NATS_URL, in the cluster's
// usage stream).
func (m *Main) usage(ctx context.Context, args []string) error {
	fs := m.newFlagSet("usage", "usage [-since 24h|7d|30d] [-brain NAME] [-by user] [-json] [-data DIR] [-env-file FILE]\n\nPrints what each bot's requests cost: requests by reply mode, errors, tokens and USD (the model's as the Claude CLI reports it; OpenAI's by brainbot's price table).")
	since := fs.String("since", "24h", "how far back: a duration such as 24h, or days such as 7d or 30d")
	brainID := fs.String("brain", "", "only this brain (its file name without .yaml)")
	by := fs.String("by", "", `"user": one line per user`)
	asJSON := fs.Bool("json", false, "print JSON lines, for scripts")
	cfg, err := m.loadConfig(fs, args, settingsNamed("BRAINBOT_DATA", "BRAINBOT_NATS_URL"))
	if err != nil {
		return usageError{err}
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("want no arguments, got %q", fs.Args())}
	}
	window, err := parseSince(*since)
	if err != nil {
		return usageError{fmt.Errorf("-since %q: %w", *since, err)}
	}
	if *by != "" && *by != "user" {
		return usageError{fmt.Errorf(`-by %q: the only grouping is "user"`, *by)}
	}
	filter := state.UsageFilter{Since: time.Now().Add(-window), Bot: *brainID, ByUser: *by == "user"}
	var lines []state.UsageLine
	if cfg.NATSURL != "" {
		// The instances of a cluster keep their records in one stream.
		if lines, err = jetstream.UsageReport(ctx, cfg.NATSURL, filter); err != nil {
			return fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_NATS_URL").name(), err)
		}
	} else {
		db, err := openState(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		if lines, err = db.UsageReport(ctx, filter); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeUsageJSON(m.Stdout, lines)
	}
	writeUsageTable(m.Stdout, lines, *by == "user", *since)
	return nil
}

// parseSince reads a Go duration, or whole days as "7d".
func parseSince(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("want a positive number of days, such as 7d")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a duration such as 24h, or days such as 7d")
	}
	return d, nil
}

func writeUsageTable(w io.Writer, lines []state.UsageLine, byUser bool, since string) {
	if len(lines) == 0 {
		fmt.Fprintf(w, "no requests in the last %s\n", since)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "brain\t"
	if byUser {
		head += "user\t"
	}
	fmt.Fprintln(tw, head+"mode\trequests\terrors\tinput tok\toutput tok\tcache read\tcache write\tclaude $\topenai $\ttotal $\t")
	var total state.UsageLine
	for _, l := range lines {
		row := l.Bot + "\t"
		if byUser {
			row += userCell(l.User) + "\t"
		}
		fmt.Fprintln(tw, row+usageCells(l))
		total.Add(l)
	}
	row := "total\t"
	if byUser {
		row += "\t"
	}
	fmt.Fprintln(tw, row+usageCells(total))
	_ = tw.Flush() // writes to m.Stdout; nowhere to report a failure
}

// userCell names a usage line's user: a forgotten user's records stay,
// without the id.
func userCell(user int64) string {
	if user == 0 {
		return "forgotten"
	}
	return strconv.FormatInt(user, 10)
}

func usageCells(l state.UsageLine) string {
	return fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.4f\t%.4f\t", l.Mode, l.Requests, l.Errors,
		l.InputTokens, l.OutputTokens, l.CacheReadTokens, l.CacheWriteTokens, l.ClaudeUSD, l.OpenAIUSD, l.ClaudeUSD+l.OpenAIUSD)
}

func writeUsageJSON(w io.Writer, lines []state.UsageLine) error {
	enc := json.NewEncoder(w)
	for _, l := range lines {
		err := enc.Encode(map[string]any{
			"brain": l.Bot, "user": l.User, "mode": l.Mode, "requests": l.Requests, "errors": l.Errors,
			"input_tokens": l.InputTokens, "output_tokens": l.OutputTokens,
			"cache_read_tokens": l.CacheReadTokens, "cache_write_tokens": l.CacheWriteTokens,
			"claude_usd": l.ClaudeUSD, "openai_usd": l.OpenAIUSD, "total_usd": l.ClaudeUSD + l.OpenAIUSD,
		})
		if err != nil {
			return err
		}
	}
	return nil
}
