package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/admin"
	"brainbot/bot"
	"brainbot/claude"
	"brainbot/httpserve"
	"brainbot/metrics"
	"brainbot/output"
	"brainbot/state"
	"brainbot/state/jetstream"
	"brainbot/state/sqlite"
)

// run serves every bot in the brains folder until ctx ends (SIGINT or
// SIGTERM), then lets requests in flight finish within the grace period.
func (m *Main) run(ctx context.Context, args []string) (err error) {
	started := time.Now()
	fs := m.newFlagSet("run", "run [flags]\n\nRuns every bot in the brains folder. Each flag has an environment variable of the same meaning; the flag wins.")
	cfg, err := m.runConfig(fs, args)
	if err != nil {
		return err
	}

	secrets := newSecretSet(m.Environ)
	checks := m.preflight(ctx, cfg, secrets.Add)
	logFile := cfg.LogFile
	if checks.failedCheck(checkLog) {
		logFile = "" // say why on stderr alone
	}
	log, err := newLogger(logSettings{Level: cfg.LogLevel, Format: cfg.LogFormat, File: logFile}, m.Stderr, m.Terminal, secrets)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }() // a failed flush of stderr has nowhere to be reported
	// From here on the error that ends run is a log line like the others
	// (JSON in JSON mode), with its causes.
	defer func() { err = logFailure(log, err) }()
	if !logPreflight(log, checks) {
		return errNotStarted
	}
	// The admin who stops the service learns at once that brainbot heard
	// it, not only once the requests in flight have finished; and before
	// "brainbot stopped", however late AfterFunc's goroutine runs.
	stopping := sync.OnceFunc(func() {
		log.Info("stopping: no new messages; requests in flight may finish within the grace period",
			zap.String("cause", context.Cause(ctx).Error()), zap.Duration("grace_ms", cfg.Grace))
	})
	defer context.AfterFunc(ctx, stopping)()

	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("BRAINBOT_DATA (-data): %w", err)
	}
	reg := metrics.New()
	reg.Build(buildVersion())
	// Spares wait while requests wait for a Claude slot.
	ans, err := m.startAnswerer(cfg, log, gaugeCount(reg.ClaudeWaiting))
	if err != nil {
		return err
	}
	defer ans.close()
	driver := ans.driver
	// The one place that chooses where the state is kept: one SQLite file,
	// or the cluster's JetStream, shared with the other instances.
	var backend state.Backend
	var shared *jetstream.Cluster
	if cfg.NATSURL == "" {
		db, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, sqlite.FileName), sqlite.Log(log))
		if err != nil {
			return err
		}
		defer db.Close()
		backend = db
	} else {
		if shared, err = joinCluster(ctx, cfg, log); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while it waited for NATS: a stop like any other
			}
			return err
		}
		defer shared.Close()
		backend = shared.Backend(driver.SessionFile)
	}
	ans.tools.UseNotes(notebook{backend})
	reg.TrackWarm(driver.Warm)
	reg.TrackSpares(func() metrics.SpareCounts {
		s := driver.SpareStats()
		return metrics.SpareCounts{Ready: s.Ready, Starting: s.Starting, Wanted: s.Wanted, Taken: s.Taken, Missed: s.Missed, Failed: s.Failed, Started: s.Started}
	})
	botCfg := bot.Config{
		BrainsDir:        cfg.BrainsDir,
		PanelsDir:        cfg.PanelsDir,
		DataDir:          cfg.DataDir,
		APIURL:           cfg.TelegramAPIURL,
		MaxClaude:        cfg.MaxClaude,
		MaxWaitingPerBot: cfg.MaxWaiting,
		MaxWait:          cfg.MaxWait,
		Grace:            cfg.Grace,
		Claude:           driver,
		Warmer:           driver,
		Spares:           cfg.Spares,
		// The conversations that would still be warm had brainbot not
		// stopped, within half the warm budget: the other half stays for
		// spares and new conversations.
		PrewarmWithin: cfg.WarmIdle,
		PrewarmMax:    cfg.MaxWarm / 2,
		Transcriber:   ans.transcriber,
		Speaker:       ans.speaker,
		FileAfterTurn: cfg.SpeechEarly == "off",
		SpeakEarly:    ans.speakEarly,
		State:         backend,
		Log:           log,
		Metrics:       reg,
		LookupEnv:     m.lookupEnv,
		// Every bot token, inline or from the environment, and every value
		// a brain's MCP server references is masked in the logs from the
		// moment it is resolved.
		OnSecret:   secrets.Add,
		WebhookURL: cfg.WebhookURL,
	}
	var info []func() string
	if shared != nil {
		reg.TrackCluster(func() metrics.ClusterState {
			s := shared.Status()
			return metrics.ClusterState{BotsPolled: len(s.Polled), PartitionsOwned: len(s.Partitions),
				NATSConnected: s.Connected, NATSReconnects: s.Reconnects, NATSUnavailable: !s.UnavailableSince.IsZero(), NATSOutages: s.Outages}
		})
		info = append(info, clusterInfo(shared))
		log.Info("joined the cluster", zap.String("instance", shared.Instance()), zap.Int("partitions", shared.Partitions()))
	}
	manager, err := bot.New(botCfg)
	if err != nil {
		return err
	}
	ans.tools.UseSchedule(schedule{store: backend, wake: manager.Wake})
	ready := manager.Ready
	if shared != nil {
		ready = clusterReady(shared, manager.Ready)
		// After the bots stopped: what they held and did not answer goes
		// to the other instances at once.
		defer shared.Release()
	}
	reg.TrackReady(ready)
	v, rev := buildVersion()
	log.Info("brainbot starting", zap.String("version", v), zap.String("revision", rev),
		zap.String("brains", cfg.BrainsDir), zap.String("panels", cfg.PanelsDir), zap.String("data", cfg.DataDir),
		zap.String("telegram_api", cfg.TelegramAPIURL), zap.String("claude", cfg.ClaudeCmd), zap.String("tools", ans.toolsURL),
		zap.String("claude_version", checks.claudeVersion), zap.Bool("claude_bare", ans.bare),
		zap.Int("max_claude", cfg.MaxClaude), zap.Duration("grace_ms", cfg.Grace))
	log.Info(checks.summary("running"))
	surface := admin.New(admin.Config{
		Token: cfg.AdminToken, Ready: ready, Info: info, Metrics: reg.Handler(),
		Status: admin.StatusSource{Bots: manager.Status, Claude: claudeStats(driver), CLIs: driver.CLIsOf,
			Version: v, Revision: rev, Started: started, Instance: instanceName(cfg), Cluster: clusterView(shared), Now: time.Now},
		Conversations: admin.Conversations{State: backend, Claude: driver, Forget: manager.Forget, Log: log},
	})
	stopAdmin, err := serveAdmin(cfg, surface, log)
	if err != nil {
		return err
	}
	defer stopAdmin()
	if cfg.WebhookURL != "" {
		webhook := httpserve.Endpoint{Name: "webhook endpoint", Handler: manager.WebhookHandler(), Limits: webhookLimits}
		stop, err := webhook.ListenAndServe(cmp.Or(cfg.WebhookAddr, defaultWebhookAddr), log)
		if err != nil {
			return fmt.Errorf("BRAINBOT_WEBHOOK_ADDR (-webhook-addr) %q: %w", cfg.WebhookAddr, err)
		}
		defer stop()
	}
	defer startPruning(ctx, cfg.DataDir, map[output.Kind]output.Retention{
		output.Audio: cfg.AudioRetention, output.Image: cfg.ImageRetention,
	}, pruneEvery, log)()
	err = manager.Run(ctx)
	if ctx.Err() != nil {
		stopping()
	}
	if err != nil {
		log.Error("brainbot stopped", zap.Error(err))
		return errReported
	}
	log.Info("brainbot stopped")
	return nil
}

// Telegram opens up to 40 connections per bot (setWebhook's
// max_connections), spread over the instances behind the load balancer,
// which may be the one client all of them come from.
var webhookLimits = httpserve.For(2048, 512)

// adminLimits suit a scraper and a health checker or two, and the admin.
var adminLimits = httpserve.For(256, 16)

// serveAdmin serves the admin surface on the admin socket, and on the
// admin address if there is one.
func serveAdmin(cfg Config, surface *admin.Surface, log *zap.Logger) (stop func(), err error) {
	ln, err := admin.ListenSocket(cfg.adminSocket())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_ADMIN_SOCKET").name(), err)
	}
	stopSocket := httpserve.Endpoint{Name: "admin socket", Handler: surface.Handler(admin.Socket), Limits: adminLimits}.Serve(ln, log)
	if cfg.HTTPAddr == "" {
		return stopSocket, nil
	}
	address := httpserve.Endpoint{Name: "admin endpoint", Handler: surface.Handler(admin.Address), Limits: adminLimits}
	stopAddress, err := address.ListenAndServe(cfg.HTTPAddr, log)
	if err != nil {
		stopSocket()
		return nil, fmt.Errorf("%s %q: %w", lookupSetting("BRAINBOT_HTTP_ADDR").name(), cfg.HTTPAddr, err)
	}
	return func() { stopAddress(); stopSocket() }, nil
}

// claudeStats reads the driver's CLIs for /status.
func claudeStats(d *claude.Driver) func() admin.ClaudeStatus {
	return func() admin.ClaudeStatus {
		s := d.SpareStats()
		return admin.ClaudeStatus{Warm: d.Warm(), SparesReady: s.Ready, SparesStarting: s.Starting, SparesWanted: s.Wanted,
			SparesTaken: s.Taken, SparesMissed: s.Missed}
	}
}

// clusterView is what /status reads of the cluster (nil: alone; a nil
// *Cluster in the interface would not be).
func clusterView(c *jetstream.Cluster) admin.ClusterView {
	if c == nil {
		return nil
	}
	return statusOfCluster{c}
}

// statusOfCluster is a cluster as /status reads it: each member's
// partitions are what jetstream.Assign gives it; what is pending is
// admin's Pending.
type statusOfCluster struct{ *jetstream.Cluster }

func (c statusOfCluster) Assigned(members []string, member string) []int {
	return jetstream.Assign(members, member, c.Partitions())
}

func (c statusOfCluster) Pending(ctx context.Context) (admin.Pending, error) {
	total, byBot, err := c.Cluster.Pending(ctx)
	return admin.Pending{Messages: total, ByBot: byBot}, err
}

// logFailure logs err, the error that ended run, and returns it as
// reported; one already reported stays as it is.
func logFailure(log *zap.Logger, err error) error {
	if err == nil || errors.Is(err, errReported) || errors.Is(err, errNotStarted) {
		return err
	}
	log.Error("brainbot stopped", zap.Error(err))
	return errReported
}

// pruneEvery is how often retention limits are applied.
const pruneEvery = time.Hour

// pruneOutputs applies the retention limits to the organised files now and
// then every interval, until ctx ends. Kinds without limits are left alone.
func pruneOutputs(ctx context.Context, dataDir string, limits map[output.Kind]output.Retention, interval time.Duration, log *zap.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		for kind, r := range limits {
			// Even with retention off: unorganised files go after a day.
			removed, err := output.Prune(dataDir, kind, r, time.Now())
			if err != nil {
				log.Warn("pruning old files failed", zap.Stringer("kind", kind), zap.Error(err))
			} else if removed > 0 {
				log.Info("pruned old files", zap.Stringer("kind", kind), zap.Int("removed", removed),
					zap.Duration("max_age_ms", r.MaxAge), zap.Int64("max_bytes", r.MaxBytes))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
