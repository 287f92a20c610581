package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"brainbot/cluster/natstest"
)

// A message held (kept in progress) by the last owner of a partition is
// not handed to the next owner while it is being worked on.
func TestHeldMessageStaysWithItsHolderAcrossAHandover(t *testing.T) {
	url := natstest.Start(t)
	a, b := join(t, url, "a"), join(t, url, "b")
	ctx := context.Background()
	if err := a.Publish(ctx, "bot", 1, 0, 1, update(1, 1, "x")); err != nil {
		t.Fatal(err)
	}
	var part int
	for p := range 8 {
		c, _ := a.stream.Consumer(ctx, consumerName(p))
		info, _ := c.Info(ctx)
		if info.NumPending > 0 {
			part = p
		}
	}
	wa, err := a.startWorker(part)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Delivery, 1)
	a.mu.Lock()
	a.handle = func(d *Delivery) { got <- d }
	a.mu.Unlock()
	d := <-got
	stop := make(chan struct{})
	go func() { // keep it in progress
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				_ = d.msg.InProgress()
			}
		}
	}()
	wa.stop()
	var handed atomic.Int32
	b.mu.Lock()
	b.handle = func(*Delivery) { handed.Add(1) }
	b.mu.Unlock()
	wb, err := b.startWorker(part)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.stop()
	time.Sleep(5 * time.Second) // 2.5 ack waits
	if n := handed.Load(); n != 0 {
		t.Fatalf("the message in progress at a was handed to b %d times", n)
	}
	close(stop)
	_ = d.msg.DoubleAck(ctx)
}
