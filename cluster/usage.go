package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"brainbot/bot/store"
)

// UsageReport sums the usage records in the usage stream that f selects,
// per bot (and user) and mode, as store.Store.UsageReport does for one
// instance's database: for `brainbot usage` in a cluster.
func UsageReport(ctx context.Context, url string, f store.UsageFilter) ([]store.UsageLine, error) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, UsageStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
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
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &f.Since})
	if err != nil {
		return nil, fmt.Errorf("usage stream: %w", err)
	}
	type key struct {
		bot  string
		user int64
		mode string
	}
	sums := map[key]*store.UsageLine{}
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
			var u store.Usage
			if json.Unmarshal(msg.Data(), &u) != nil || f.Bot != "" && u.Bot != f.Bot || u.At.Before(f.Since) {
				continue
			}
			k := key{bot: u.Bot, mode: u.Mode}
			if f.ByUser {
				k.user = u.User
			}
			l := sums[k]
			if l == nil {
				l = &store.UsageLine{Bot: k.bot, User: k.user, Mode: k.mode}
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
	out := make([]store.UsageLine, 0, len(sums))
	for _, l := range sums {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b store.UsageLine) int {
		return cmp.Or(cmp.Compare(a.Bot, b.Bot), cmp.Compare(a.User, b.User), cmp.Compare(a.Mode, b.Mode))
	})
	return out, nil
}
