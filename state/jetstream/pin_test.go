package jetstream

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"brainbot/message"
	"brainbot/state/jetstream/natstest"
)

// A message held (kept in progress) by the last owner of a partition is
// not handed to the next owner while it is being worked on.
func TestHeldMessageStaysWithItsHolderAcrossAHandover(t *testing.T) {
	ctx := context.Background()
	_, b, d, letGo := lastOwnerHolds(t)
	var handed atomic.Int32
	b.updates.mu.Lock()
	b.handle = func(*Delivery) { handed.Add(1) }
	b.updates.mu.Unlock()
	wb, err := b.startWorker(d.w.p)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.stop()
	time.Sleep(5 * time.Second) // 2.5 ack waits
	if n := handed.Load(); n != 0 {
		t.Fatalf("the message in progress at a was handed to b %d times", n)
	}
	letGo()
	_ = d.msg.DoubleAck(ctx)
}

// A graceful stop hands what the instance held to the next owner at once,
// not after the ack wait, and in order. Release may come while the work
// loop, its context just ended, is still stopping the workers: it must not
// hand the updates back to a worker that still pulls (which would take
// them again and hold them, unkept, until the ack wait).
func TestReleaseHandsOverAtOnce(t *testing.T) {
	for _, gap := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond} {
		t.Run(gap.String(), func(t *testing.T) { releaseHandsOverAtOnce(t, gap) })
	}
}

// joinLongAckWait joins an instance whose held updates the server would
// hand on only after 30 s: a test that sees them handed on sooner sees
// them handed back.
func joinLongAckWait(t *testing.T, url, name string) *Cluster {
	c, err := Connect(context.Background(), Config{URL: url, Instance: name, Partitions: 2, LeaseTTL: 1500 * time.Millisecond,
		MemberTTL: 1500 * time.Millisecond, PinnedTTL: 1500 * time.Millisecond, AckWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func releaseHandsOverAtOnce(t *testing.T, gap time.Duration) {
	url := natstest.Start(t)
	ctx := context.Background()
	a := joinLongAckWait(t, url, "a")
	actx, stopA := context.WithCancel(ctx)
	var held atomic.Int32
	a.Work(actx, func(*Delivery) { held.Add(1) }) // never answers
	for id := int64(1); id <= 10; id++ {
		if err := publish(ctx, a, 5, id, update(id, 5, "x")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hangGuard, "a to hold all", func() bool { return held.Load() == 10 })
	b := joinLongAckWait(t, url, "b")
	g := newGot()
	b.Work(ctx, func(d *Delivery) { g.record("b", d); go d.Done(true) })
	stopA()
	time.Sleep(gap) // the work loop begins stopping the workers
	a.Release()
	start := time.Now()
	// At once: well before the 30 s ack wait would hand them on anyway.
	waitFor(t, 10*time.Second, "b to answer what a held", func() bool { return g.count() == 10 })
	t.Logf("handed over in %v", time.Since(start))
	if n := held.Load(); n != 10 {
		t.Errorf("a was handed %d updates, %d after it released them", n, n-10)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, id := range g.chat[5] {
		if id != int64(i+1) {
			t.Fatalf("out of order: %v", g.chat[5])
		}
	}
}

// While the last owner of a partition still holds an update (queued or
// being answered there), the next owner hands on none of the later ones
// of that conversation, even while new ones keep arriving at it: updates
// delivered after the next owner looked must not hide the one the last
// owner still holds.
func TestNoLaterUpdateHandedOnWhileTheLastOwnerHoldsAnEarlierOne(t *testing.T) {
	ctx := context.Background()
	a, b, d, letGo := lastOwnerHolds(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var handed atomic.Int32
	b.updates.mu.Lock()
	b.handle = func(d *Delivery) { handed.Add(1); go d.Done(true) }
	b.updates.mu.Unlock()
	wb, err := b.startWorker(d.w.p)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.stop()
	wg.Add(1)
	go func() { // later updates of the same conversation keep coming
		defer wg.Done()
		for id := int64(2); ; id++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			_ = publish(ctx, a, 1, id, update(id, 1, "later"))
		}
	}()
	time.Sleep(4 * time.Second)
	if n := handed.Load(); n != 0 {
		t.Errorf("b handed on %d later updates while a held an earlier one", n)
	}
	close(stop)
	wg.Wait()
	letGo()
	d.Done(true)
	waitFor(t, hangGuard, "b to hand on the later ones once a is done", func() bool { return handed.Load() > 0 })
}

// Order is kept per conversation, not per partition: while the last
// owner still holds an update of one conversation, the next owner hands
// on at once the updates of another conversation of the same partition
// (a killed instance's idle conversations do not wait for its busy ones'
// ack wait), and the held conversation's later updates wait for it.
func TestOtherConversationsGoOnWhileTheLastOwnerHoldsOne(t *testing.T) {
	ctx := context.Background()
	a, b, d, letGo := lastOwnerHolds(t)
	part := d.w.p
	other := chatOfPartition(t, 8, part, 1)
	g := newGot()
	b.updates.mu.Lock()
	b.handle = func(d *Delivery) { g.record("b", d); go d.Done(true) }
	b.updates.mu.Unlock()
	wb, err := b.startWorker(part)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.stop()
	if err := publish(ctx, a, 1, 2, update(2, 1, "after the held one")); err != nil {
		t.Fatal(err)
	}
	for id := int64(3); id <= 5; id++ {
		if err := publish(ctx, a, other, id, update(id, other, "another conversation")); err != nil {
			t.Fatal(err)
		}
	}
	// a holds its update until the end of the test: only an order kept
	// per conversation hands these on.
	waitFor(t, hangGuard, "b to hand on the other conversation's updates", func() bool { return g.count() >= 3 })
	g.mu.Lock()
	early, otherIDs := len(g.chat[1]), g.chat[other]
	g.mu.Unlock()
	if early != 0 {
		t.Errorf("b handed on chat 1's later update while a held its earlier one")
	}
	if want := []int64{3, 4, 5}; !slices.Equal(otherIDs, want) {
		t.Errorf("the other conversation's updates went on as %v, want %v", otherIDs, want)
	}
	letGo()
	d.Done(true)
	waitFor(t, hangGuard, "b to hand on chat 1's later update once a is done", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.chat[1]) == 1
	})
}

// chatOfPartition is a private chat other than not whose updates the
// stream files under partition part of n, as the server maps them.
func chatOfPartition(t *testing.T, n, part int, not int64) int64 {
	t.Helper()
	cfg := partitioning(n)
	tr, err := server.NewSubjectTransform(cfg.Source, cfg.Destination)
	if err != nil {
		t.Fatal(err)
	}
	want := partitionSubjects(part)
	for chat := int64(2); chat < 10000; chat++ {
		stored, err := tr.Match(conversationSubject(message.Key{Bot: "bot", Chat: chat}))
		if err != nil {
			t.Fatal(err)
		}
		if chat != not && strings.HasPrefix(stored, strings.TrimSuffix(want, ">")) {
			return chat
		}
	}
	t.Fatalf("no chat maps to partition %d", part)
	return 0
}

// What the intake hands back as this instance stops (queued, not begun)
// goes to the next owner at once: not into a pull of the stopping worker
// that nobody reads any more, where it would wait out the ack wait, and
// not only when Release comes after the requests in flight finished.
func TestAbandonedWhileLeavingGoesToTheNextOwnerAtOnce(t *testing.T) {
	url := natstest.Start(t)
	ctx := context.Background()
	a := joinLongAckWait(t, url, "a")
	actx, stopA := context.WithCancel(ctx)
	var mu sync.Mutex
	var queued []*Delivery
	a.Work(actx, func(d *Delivery) { mu.Lock(); queued = append(queued, d); mu.Unlock() })
	for id := int64(1); id <= 10; id++ {
		if err := publish(ctx, a, 5, id, update(id, 5, "x")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, hangGuard, "a to hold all", func() bool { mu.Lock(); defer mu.Unlock(); return len(queued) == 10 })
	b := joinLongAckWait(t, url, "b")
	g := newGot()
	b.Work(ctx, func(d *Delivery) { g.record("b", d); go d.Done(true) })
	stopA() // SIGTERM: the intake hands back what was queued
	mu.Lock()
	for _, d := range queued {
		d.Abandon()
	}
	mu.Unlock()
	// a's Release waits for its requests in flight: here, until the end.
	defer a.Release()
	waitFor(t, 10*time.Second, "b to answer what a handed back", func() bool { return g.count() == 10 })
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Equal(g.chat[5], []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("out of order: %v", g.chat[5])
	}
}

// lastOwnerHolds joins instances a and b and has a hold chat 1's first
// update in progress (holdInProgress): b, taking its partition, is the
// next owner.
func lastOwnerHolds(t *testing.T) (a, b *Cluster, d *Delivery, letGo func()) {
	t.Helper()
	url := natstest.Start(t)
	a, b = join(t, url, "a"), join(t, url, "b")
	if err := publish(context.Background(), a, 1, 1, update(1, 1, "held")); err != nil {
		t.Fatal(err)
	}
	d, letGo = holdInProgress(t, a, partitionOf(t, a))
	return a, b, d, letGo
}

// holdInProgress has c take partition part until it is handed its first
// update, then stop pulling it while keeping that update in progress,
// unanswered, until letGo: the partition is free for a next owner while
// c still holds an update of it.
func holdInProgress(t *testing.T, c *Cluster, part int) (d *Delivery, letGo func()) {
	t.Helper()
	got := make(chan *Delivery, 1)
	c.updates.mu.Lock()
	c.handle = func(d *Delivery) { got <- d }
	c.updates.mu.Unlock()
	w, err := c.startWorker(part)
	if err != nil {
		t.Fatal(err)
	}
	d = <-got
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
				_ = d.msg.InProgress()
			}
		}
	}()
	w.stop()
	return d, func() { close(stop); <-done }
}

// A worker stopped while its handover waits for the last owner's update
// (held in progress there) returns only once the handover has ended: no
// goroutine of a stopped worker looks at the stream any more.
func TestStopEndsTheHandover(t *testing.T) {
	ctx := context.Background()
	a, b, d, letGo := lastOwnerHolds(t)
	defer func() { letGo(); d.Done(true) }()
	part := d.w.p
	b.updates.mu.Lock()
	b.handle = func(*Delivery) { t.Error("b handed on an update while a held an earlier one") }
	b.updates.mu.Unlock()
	wb, err := b.startWorker(part)
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(ctx, a, 1, 2, update(2, 1, "after the held one")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hangGuard, "b's handover to wait for a", func() bool {
		wb.mu.Lock()
		defer wb.mu.Unlock()
		return wb.buffering && wb.blocked != nil
	})
	wb.stop()
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, fmt.Sprintf("(*worker).handover(%p", wb)) {
		t.Errorf("the handover of a stopped worker is still running:\n%s", stacks)
	}
}
