package jetstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"

	"brainbot/state"
)

// UsageReport sums the usage records in the usage stream of the cluster
// at url that f selects, per bot (and user) and mode: for `brainbot usage`
// in a cluster, which joins none.
func UsageReport(ctx context.Context, url string, f state.UsageFilter) ([]state.UsageLine, error) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	defer nc.Close()
	js, err := jsapi.New(nc)
	if err != nil {
		return nil, err
	}
	return usageReport(ctx, js, f)
}

// UsageReport sums the usage records f selects, per bot (and user) and
// mode.
func (s *State) UsageReport(ctx context.Context, f state.UsageFilter) ([]state.UsageLine, error) {
	return usageReport(ctx, s.c.js, f)
}

func usageReport(ctx context.Context, js jsapi.JetStream, f state.UsageFilter) ([]state.UsageLine, error) {
	stream, err := js.Stream(ctx, UsageStream)
	if errors.Is(err, jsapi.ErrStreamNotFound) {
		return nil, nil // no instance has run yet
	}
	if err != nil {
		return nil, fmt.Errorf("usage stream: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("usage stream: %w", err)
	}
	subject := "brainbot.usage.>"
	if f.Bot != "" {
		subject = "brainbot.usage." + keyPart(f.Bot)
	}
	cons, err := stream.OrderedConsumer(ctx, jsapi.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jsapi.DeliverByStartTimePolicy, OptStartTime: &f.Since})
	if err != nil {
		return nil, fmt.Errorf("usage stream: %w", err)
	}
	type key struct {
		bot  string
		user int64
		mode string
	}
	sums := map[key]*state.UsageLine{}
	last := info.State.LastSeq
	for seen := uint64(0); seen < last; {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return nil, err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, err := msg.Metadata()
			if err != nil {
				return nil, err
			}
			seen = meta.Sequence.Stream
			var u state.Usage
			if json.Unmarshal(msg.Data(), &u) != nil || f.Bot != "" && u.Bot != f.Bot || u.At.Before(f.Since) {
				continue
			}
			k := key{bot: u.Bot, mode: u.Mode}
			if f.ByUser {
				k.user = u.User
			}
			l := sums[k]
			if l == nil {
				l = &state.UsageLine{Bot: k.bot, User: k.user, Mode: k.mode}
				sums[k] = l
			}
			l.Add(u.Line())
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			break // nothing more matches the filter
		}
	}
	out := make([]state.UsageLine, 0, len(sums))
	for _, l := range sums {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b state.UsageLine) int {
		return cmp.Or(cmp.Compare(a.Bot, b.Bot), cmp.Compare(a.User, b.User), cmp.Compare(a.Mode, b.Mode))
	})
	return out, nil
}
