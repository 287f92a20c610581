package jetstream

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state/jetstream/natstest"
)

// partition computes what the stream's subject transform does: each
// conversation's update is pending on the partition it names.
func TestPartitionIsTheStreams(t *testing.T) {
	c := join(t, natstest.Start(t), "a")
	ctx := context.Background()
	pending := func() []uint64 {
		counts := make([]uint64, c.Partitions())
		for p := range counts {
			cons, err := c.stream.Consumer(ctx, consumerName(p))
			if err != nil {
				t.Fatal(err)
			}
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			counts[p] = info.NumPending
		}
		return counts
	}
	convs := []message.Key{{Bot: "narrator", Chat: 7}, {Bot: "my.bot", Chat: -1001234567890, Thread: 42},
		{Bot: "a-b_c", Chat: 123456789}, {Bot: "narrator", Chat: -5}, {Bot: "x", Chat: 1, Thread: 3}, {Bot: "x", Chat: 13}}
	for i, conv := range convs {
		before := pending()
		env := message.Envelope{Bot: conv.Bot, UpdateID: int64(i + 1), Key: conv, Raw: []byte(`{}`)}
		if err := c.Publish(ctx, env); err != nil {
			t.Fatal(err)
		}
		var now []uint64
		waitFor(t, hangGuard, "the update pending", func() bool { now = pending(); return !slices.Equal(now, before) })
		if want := partition(conv, c.Partitions()); now[want] != before[want]+1 {
			t.Errorf("%s: pending %v → %v, want it on partition %d", conv, before, now, want)
		}
	}
}

// Each instance lists the recent sessions of the conversations of its own
// partitions, most recent first: the two together list each once.
func TestRecentSessionsOfOwnedPartitions(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a"), join(t, url, "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.Work(ctx, func(d *Delivery) { d.Done(true) })
	b.Work(ctx, func(d *Delivery) { d.Done(true) })
	waitFor(t, hangGuard, "the partitions shared", func() bool {
		return len(a.Status().Partitions) > 0 && len(b.Status().Partitions) > 0 &&
			len(a.Status().Partitions)+len(b.Status().Partitions) == 8
	})
	t0 := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	if recent, err := a.State().RecentSessions(ctx, t0, 20); err != nil || len(recent) != 0 {
		t.Fatalf("no sessions yet: %v, %v", recent, err)
	}
	var want []string
	for i := range 20 {
		conv := message.Key{Bot: "bot", Chat: int64(100 + i)}
		if err := a.State().UseSession(ctx, conv, fmt.Sprint("s", i), t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if i >= 5 {
			want = append(want, conv.String())
		}
	}
	listed := map[string]bool{}
	for _, c := range []*Cluster{a, b} {
		recent, err := c.State().RecentSessions(ctx, t0.Add(5*time.Minute), 20)
		if err != nil {
			t.Fatal(err)
		}
		owned := c.Status().Partitions
		for i, r := range recent {
			if listed[r.Conversation.String()] || !slices.Contains(owned, partition(r.Conversation, 8)) || r.ID != fmt.Sprint("s", r.Conversation.Chat-100) {
				t.Errorf("%s listed %s (%s) of partition %d; it owns %v", c.Instance(), r.Conversation, r.ID, partition(r.Conversation, 8), owned)
			}
			if i > 0 && r.LastUsed.After(recent[i-1].LastUsed) {
				t.Errorf("%s: not the most recent first: %v", c.Instance(), recent)
			}
			listed[r.Conversation.String()] = true
		}
	}
	if len(listed) != len(want) {
		t.Errorf("listed %v, want each of %v once", listed, want)
	}
	if recent, _ := a.State().RecentSessions(ctx, t0, 2); len(recent) > 2 {
		t.Errorf("%d listed, want at most the limit 2", len(recent))
	}
}
