package main

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"brainbot/output"
)

// startPruning runs pruneOutputs until ctx ends or the returned stop is
// called; stop returns once pruning has, so no pass outlives run (and
// the data folder it reads).
func startPruning(ctx context.Context, dataDir string, limits map[output.Kind]output.Retention, interval time.Duration, log *zap.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var pruning sync.WaitGroup
	pruning.Go(func() { pruneOutputs(ctx, dataDir, limits, interval, log) })
	return func() {
		cancel()
		pruning.Wait()
	}
}
