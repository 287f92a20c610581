package jetstream

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
	"brainbot/state/jetstream/natstest"
)

// When b stops, a takes b's partitions and hears at once of the recent
// sessions of their conversations: those used since, the most recent
// first, at most the limit; none of the conversations a answered before.
func TestArrivalsOfThePartitionsTaken(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a"), join(t, url, "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.Work(ctx, func(d *Delivery) { d.Done(true) })
	bCtx, stopB := context.WithCancel(ctx)
	b.Work(bCtx, func(d *Delivery) { d.Done(true) })
	waitFor(t, hangGuard, "the partitions spread", func() bool { return spreadOver(ctx, []*Cluster{a, b}, 2) })

	t0 := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	since := t0.Add(5 * time.Minute)
	bOwned := b.Status().Partitions
	var moved []string // b's conversations used since, the most recent first
	var older, aOwned int
	for i := range 20 {
		conv := message.Key{Bot: "bot", Chat: int64(100 + i)}
		used := t0.Add(time.Duration(i) * time.Minute)
		if err := a.State().UseSession(ctx, conv, fmt.Sprint("s", i), used); err != nil {
			t.Fatal(err)
		}
		switch {
		case !slices.Contains(bOwned, partition(conv, 8)):
			aOwned++
		case used.Before(since):
			older++
		default:
			moved = append([]string{fmt.Sprint("s", i)}, moved...)
		}
	}
	if len(moved) < 2 || older == 0 || aOwned == 0 {
		t.Fatalf("the conversations do not test the limit, since and a's own: %d moved, %d older, %d of a's", len(moved), older, aOwned)
	}
	limit := len(moved) - 1

	arrived := make(chan []state.RecentSession, 8)
	go a.State().WatchArrivals(ctx, func() time.Time { return since }, limit, func(l []state.RecentSession) { arrived <- l })
	stopB()
	b.Release()

	var got []string
	select {
	case l := <-arrived:
		for _, r := range l {
			got = append(got, r.ID)
		}
	case <-time.After(hangGuard):
		t.Fatal("no arrivals heard after b stopped")
	}
	if want := moved[:limit]; !slices.Equal(got, want) {
		t.Errorf("arrivals %v, want %v (b owned %v)", got, want, bOwned)
	}
}
