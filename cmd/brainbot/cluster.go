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
// (BRAINBOT_NATS_URL).
func joinCluster(ctx context.Context, cfg Config, log *zap.Logger) (*jetstream.Cluster, error) {
	name := instanceName(cfg)
	c, err := jetstream.Connect(ctx, jetstream.Config{URL: cfg.NATSURL, Partitions: cfg.NATSPartitions, Replicas: cfg.NATSReplicas, Instance: name,
		SpoolDir: filepath.Join(cfg.DataDir, "cluster-spool"), Log: log.Named("cluster")})
	if err != nil {
		return nil, fmt.Errorf("BRAINBOT_NATS_URL (-nats-url): %w", err)
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
// enough and has JetStream: without them no instance can work.
func checkNATS(ctx context.Context, cfg Config, r *report) {
	if cfg.NATSURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	version, err := jetstream.Ping(ctx, cfg.NATSURL)
	if err != nil {
		r.fatal("NATS", fmt.Sprintf("%s: %v", lookupSetting("BRAINBOT_NATS_URL").name(), err))
		return
	}
	detail := fmt.Sprintf("JetStream at %s (nats-server %s; brainbot needs %s or newer)",
		jetstream.Redact(cfg.NATSURL), version, jetstream.MinServerVersion)
	if cfg.WebhookURL != "" {
		detail += "; updates by webhook at " + cfg.WebhookURL
	}
	r.ok("NATS", detail)
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
