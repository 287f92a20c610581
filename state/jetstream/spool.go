package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/state"
)

// spool keeps the usage records NATS could not take, in files of their
// own (one a record, named by when it was kept), and writes them when
// NATS is back: an outage loses no record of what a request cost, and a
// restart during one neither.
type spool struct {
	dir string
	log *zap.Logger
	mu  sync.Mutex // one flush at a time
}

func newSpool(dir string, log *zap.Logger) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: spool: %w", err)
	}
	return &spool{dir: dir, log: log}, nil
}

// keep writes u to the spool.
func (s *spool) keep(u state.Usage) error {
	data, err := json.Marshal(u)
	if err != nil {
		return err
	}
	name := filepath.Join(s.dir, fmt.Sprintf("usage-%020d.json", time.Now().UnixNano()))
	if err := os.WriteFile(name+".tmp", data, 0o600); err != nil {
		return err
	}
	return os.Rename(name+".tmp", name)
}

// flush writes the kept records, oldest first, with write, removing each
// once written; it stops at the first that fails (NATS still away).
func (s *spool) flush(ctx context.Context, write func(context.Context, state.Usage) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "usage-") && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	written := 0
	for _, n := range names {
		path := filepath.Join(s.dir, n)
		data, err := os.ReadFile(path)
		var u state.Usage
		if err == nil {
			err = json.Unmarshal(data, &u)
		}
		if err != nil {
			s.log.Warn("unreadable usage record in the spool; removed", zap.String("file", path), zap.Error(err))
			os.Remove(path)
			continue
		}
		if err := write(ctx, u); err != nil {
			break
		}
		os.Remove(path)
		written++
	}
	if written > 0 {
		s.log.Info("usage records kept during the NATS outage written", zap.Int("records", written),
			zap.Int("left", len(names)-written))
	}
}

// run flushes at start and every interval, until ctx ends.
func (s *spool) run(ctx context.Context, interval time.Duration, write func(context.Context, state.Usage) error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s.flush(ctx, write)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
