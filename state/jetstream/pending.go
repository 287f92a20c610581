package jetstream

import (
	"context"
	"fmt"
	"strings"

	jsapi "github.com/nats-io/nats.go/jetstream"
)

// Pending counts the updates in the stream that are not answered yet: a
// work-queue stream keeps a message until it is acknowledged, and an
// update is acknowledged once its reply was sent. byBot counts them by
// the bot of their subject (its id as keys and subjects write it), for
// the bots that have any. One call, bounded like any try, so that /status
// answers promptly.
func (c *Cluster) Pending(ctx context.Context) (total uint64, byBot map[string]uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	info, err := c.updates.stream.Info(ctx, jsapi.WithSubjectFilter(partPrefix+".>"))
	if err != nil {
		return 0, nil, fmt.Errorf("stream %s: %w", Stream, err)
	}
	byBot = map[string]uint64{}
	for subject, n := range info.State.Subjects {
		// brainbot.part.<partition>.<bot>.<chat>.<thread>
		if parts := strings.Split(subject, "."); len(parts) == 6 {
			byBot[parts[3]] += n
		}
	}
	return info.State.Msgs, byBot, nil
}
