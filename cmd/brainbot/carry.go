package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"brainbot/admin"
	"brainbot/claude"
	"brainbot/state"
	"brainbot/state/carry"
	"brainbot/state/jetstream"
	"brainbot/state/sqlite"
)

// carryConversations copies every conversation of a cluster into this
// instance's SQLite file (-to sqlite), or of that file into the cluster
// (-to cluster), with its session, transcript and user's /voice choice,
// while the service is stopped. It exits non-zero if one could not be
// carried: that user's next message starts a new session, with the
// brain's messages.expired.
func (m *Main) carryConversations(ctx context.Context, args []string) error {
	fs := m.newFlagSet("carry", "carry -to sqlite|cluster [-data DIR] [-nats-url URL] [-env-file FILE]\n\n"+
		"Carries the conversations (sessions, transcripts, /voice choices) from the cluster at BRAINBOT_NATS_URL into the SQLite file in BRAINBOT_DATA (-to sqlite), "+
		"or from that file into the cluster (-to cluster). Run it on the one instance's machine, with the service stopped; running it again carries only what changed.")
	to := fs.String("to", "", `where to: "sqlite" (going back to one instance) or "cluster" (joining a cluster)`)
	cfg, err := m.loadConfig(fs, args, settingsNamed("BRAINBOT_DATA", "BRAINBOT_NATS_URL"))
	if err != nil {
		return usageError{err}
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("want no arguments, got %q", fs.Args())}
	}
	if *to != "sqlite" && *to != "cluster" {
		return usageError{fmt.Errorf(`-to %q: want "sqlite" or "cluster"`, *to)}
	}
	if cfg.NATSURL == "" {
		return usageError{fmt.Errorf("%s is needed: the cluster's NATS", lookupSetting("BRAINBOT_NATS_URL").name())}
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	local := func(bot, session string) string { return claude.SessionFileIn(dataDir, bot, session) }
	scratch, err := os.MkdirTemp("", "brainbot-carry-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	log, err := newLogger(logSettings{Level: "warn", Format: cfg.LogFormat}, m.Stderr, m.Terminal, newSecretSet(m.Environ))
	if err != nil {
		return err
	}
	// Connect alone joins no membership and takes no partition or lease
	// (Consume and Lease do): the instances see nothing of the carry.
	cluster, err := jetstream.Connect(ctx, jetstream.Config{URL: cfg.NATSURL, Partitions: cfg.NATSPartitions, Replicas: cfg.NATSReplicas,
		Instance: "carry-" + instanceName(Config{}), Log: log.Named("cluster")})
	if err != nil {
		return fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_NATS_URL").name(), err)
	}
	defer cluster.Close()
	if err := nothingRuns(ctx, cfg, cluster); err != nil {
		return err
	}
	shared := cluster.Backend(local)

	c := carry.Config{Local: local, Scratch: scratch}
	if *to == "sqlite" {
		if err := os.MkdirAll(dataDir, 0o750); err != nil {
			return fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_DATA").name(), err)
		}
		db, err := sqlite.Open(ctx, filepath.Join(dataDir, sqlite.FileName))
		if err != nil {
			return err
		}
		defer db.Close()
		c.From, c.To = shared, db
		c.ToTranscripts = func(func(bot, session string) string) state.Transcripts { return db }
	} else {
		db, err := openState(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		c.From, c.To = db, shared
		c.ToTranscripts = func(path func(bot, session string) string) state.Transcripts { return cluster.Transcripts(path) }
	}
	results, err := carry.Carry(ctx, c)
	if err != nil {
		return err
	}
	return m.reportCarry(results, *to)
}

// nothingRuns refuses a carry while what it carries may still change:
// an instance of the cluster beats in its membership, or a brainbot
// answers at this machine's admin socket or address (the one instance).
func nothingRuns(ctx context.Context, cfg Config, cluster *jetstream.Cluster) error {
	members, err := cluster.Members(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_NATS_URL").name(), err)
	}
	if len(members) > 0 {
		return fmt.Errorf("instances of the cluster are running (%s): stop them all first (systemctl stop brainbot), "+
			"or what they change during the carry is lost; pending in the stream: %s", strings.Join(members, ", "), pendingIn(ctx, cluster))
	}
	if conn, err := net.DialTimeout("unix", cfg.adminSocket(), time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("a brainbot answers at %s (its admin socket): the service runs on this machine; stop it first (systemctl stop brainbot), "+
			"or what it changes during the carry is lost", cfg.adminSocket())
	}
	if cfg.HTTPAddr == "" {
		return nil
	}
	conn, err := net.DialTimeout("tcp", admin.Dialable(cfg.HTTPAddr), time.Second)
	if err != nil {
		return nil // nothing listens there
	}
	conn.Close()
	return fmt.Errorf("something answers at %s (%s): the service runs on this machine; stop it first (systemctl stop brainbot), "+
		"or what it changes during the carry is lost", cfg.HTTPAddr, lookupSetting("BRAINBOT_HTTP_ADDR").name())
}

// pendingIn says what waits in the cluster's stream, not answered yet:
// to stop the instances once it is drained, with nothing left behind.
func pendingIn(ctx context.Context, cluster *jetstream.Cluster) string {
	total, byBot, err := cluster.Pending(ctx)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return admin.Pending{Messages: total, ByBot: byBot}.String()
}

// reportCarry prints each conversation's outcome and a summary; an error
// if one failed.
func (m *Main) reportCarry(results []carry.Result, to string) error {
	counts := map[carry.Outcome]int{}
	for _, r := range results {
		counts[r.Outcome]++
		k := r.Key
		fmt.Fprintf(m.Stdout, "%s: %s chat %d thread %d user %d session %s (last message %s)", r.Outcome, k.Bot, k.Chat, k.Thread,
			k.User(), r.Session.ID, r.Session.LastUsed.UTC().Format(time.DateTime))
		if r.Err != nil {
			fmt.Fprintf(m.Stdout, ": %v", r.Err)
		}
		fmt.Fprintln(m.Stdout)
	}
	fmt.Fprintf(m.Stdout, "%s carried to %s, %d already there, %d kept (newer there), %d failed\n",
		admin.Counted(counts[carry.Carried], "conversation"), to, counts[carry.Already], counts[carry.Newer], counts[carry.Failed])
	if n := counts[carry.Failed]; n > 0 {
		return fmt.Errorf("%s could not be carried: their next message starts a new session, with the brain's messages.expired", admin.Counted(n, "conversation"))
	}
	return nil
}
