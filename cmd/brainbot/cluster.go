package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"brainbot/state/jetstream"
)

// joinCluster connects to the NATS JetStream the instances share
// (BRAINBOT_NATS_URL), waiting for NATS while it cannot be reached (it may
// start after this instance). What NATS refuses for good is logged and
// errNotStarted: no restart would change it.
func joinCluster(ctx context.Context, cfg Config, log *zap.Logger) (*jetstream.Cluster, error) {
	name := instanceName(cfg)
	c, err := jetstream.Connect(ctx, jetstream.Config{URL: cfg.NATSURL, Partitions: cfg.NATSPartitions, Replicas: cfg.NATSReplicas, Instance: name,
		SpoolDir: filepath.Join(cfg.DataDir, "cluster-spool"), WaitForNATS: true, Log: log.Named("cluster")})
	if jetstream.Refused(err) {
		log.Error("brainbot not started: NATS refuses it, and would at every restart; fix the settings (brainbot doctor checks them)",
			zap.Error(fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_NATS_URL").name(), err)))
		return nil, errNotStarted
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lookupSetting("BRAINBOT_NATS_URL").name(), err)
	}
	return c, nil
}

// instanceName is this instance's name (BRAINBOT_INSTANCE), by default its
// host's name and process id.
func instanceName(cfg Config) string {
	if cfg.Instance != "" {
		return cfg.Instance
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// checkNATS checks, with BRAINBOT_NATS_URL, that NATS answers, is recent
// enough, has JetStream, and has the servers for BRAINBOT_NATS_REPLICAS:
// without them no instance can work. A NATS not reached fails the check
// but not the start: run waits for it.
func checkNATS(ctx context.Context, cfg Config, r *report) {
	if cfg.NATSURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	url := lookupSetting("BRAINBOT_NATS_URL").name()
	info, err := jetstream.Ping(ctx, cfg.NATSURL)
	switch {
	case jetstream.Refused(err):
		r.fatal(checkNATSName, fmt.Sprintf("%s: %v", url, err))
		return
	case err != nil:
		r.fail(checkNATSName, fmt.Sprintf("%s: %v (run waits for it, trying again)", url, err))
		return
	}
	if problem := replicasProblem(cfg, info); problem != "" {
		r.fatal(checkNATSName, problem)
		return
	}
	detail := fmt.Sprintf("JetStream at %s (nats-server %s; brainbot needs %s or newer)",
		jetstream.Redact(cfg.NATSURL), info.Version, jetstream.MinServerVersion)
	if cfg.WebhookURL != "" {
		detail += "; updates by webhook at " + cfg.WebhookURL
	}
	r.ok(checkNATSName, detail)
}

// checkNATSName names the check of NATS.
const checkNATSName = "NATS"

// replicasProblem says why NATS cannot keep BRAINBOT_NATS_REPLICAS copies
// of brainbot's streams and buckets ("": it can). JetStream would refuse
// every one of them at the start.
func replicasProblem(cfg Config, info jetstream.ServerInfo) string {
	replicas := max(cfg.NATSReplicas, 1)
	if replicas <= info.Servers {
		return ""
	}
	setting := fmt.Sprintf("%s is %d", lookupSetting("BRAINBOT_NATS_REPLICAS").name(), replicas)
	if info.Cluster == "" {
		return fmt.Sprintf("%s, but the NATS at %s is a single server, not a cluster: it keeps one copy; "+
			"set BRAINBOT_NATS_REPLICAS=1 (or leave it empty), or make NATS a cluster of %d servers",
			setting, jetstream.Redact(cfg.NATSURL), replicas)
	}
	return fmt.Sprintf("%s, but NATS cluster %s has %d servers: it keeps at most %d copies; "+
		"set BRAINBOT_NATS_REPLICAS to %d or fewer, or add servers to the cluster",
		setting, info.Cluster, info.Servers, info.Servers, info.Servers)
}

// clusterReady adds the cluster's connection to the bots' readiness.
func clusterReady(c *jetstream.Cluster, bots func() error) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2e9)
		defer cancel()
		if err := c.Check(ctx); err != nil {
			return err
		}
		return bots()
	}
}

// clusterInfo says what this instance does for the cluster (/readyz).
func clusterInfo(c *jetstream.Cluster) func() string {
	return func() string {
		s := c.Status()
		slices.Sort(s.Polled)
		slices.Sort(s.Partitions)
		parts := make([]string, len(s.Partitions))
		for i, p := range s.Partitions {
			parts[i] = fmt.Sprint(p)
		}
		return fmt.Sprintf("instance %s polls bots [%s], owns %d of %d partitions [%s]", s.Instance,
			strings.Join(s.Polled, " "), len(s.Partitions), c.Partitions(), strings.Join(parts, " "))
	}
}
