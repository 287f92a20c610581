package conversation

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func newGauge() prometheus.Gauge { return prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}) }

func TestSlotsRoundRobin(t *testing.T) {
	s := newSlots(1, 10, time.Minute, newGauge(), newGauge())
	if err := s.acquire(context.Background(), "a", 0, time.Time{}, cost{}, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	enter := func(bot string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.acquire(context.Background(), bot, 0, time.Time{}, cost{}, nil); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, bot)
			mu.Unlock()
			s.release()
		}()
		waitFor(t, func() bool { return s.waiting(bot) > 0 })
	}
	for range 3 {
		enter("a")
	}
	waitFor(t, func() bool { return s.waiting("a") == 3 })
	enter("b")
	enter("c")
	s.release()
	wg.Wait()
	// a, b and c each get a turn before a's second request.
	if got := order[:3]; got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("order %v, want a b c first", order)
	}
}

func TestSlotsBounds(t *testing.T) {
	s := newSlots(1, 1, 50*time.Millisecond, newGauge(), newGauge())
	ctx := context.Background()
	if err := s.acquire(ctx, "a", 0, time.Time{}, cost{}, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.acquire(ctx, "a", 0, time.Time{}, cost{}, nil) }()
	waitFor(t, func() bool { return s.waiting("a") == 1 })
	if err := s.acquire(ctx, "a", 0, time.Time{}, cost{}, nil); !errors.Is(err, errNoSlot) {
		t.Errorf("acquire with a full line = %v, want errNoSlot", err)
	}
	if err := <-done; !errors.Is(err, errNoSlot) {
		t.Errorf("acquire past the wait = %v, want errNoSlot", err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := s.acquire(ctx, "b", 0, time.Time{}, cost{}, stop); !errors.Is(err, errStopping) {
		t.Errorf("acquire while stopping = %v, want errStopping", err)
	}
	if s.waiting("a")+s.waiting("b") != 0 {
		t.Error("a waiter that gave up is still in line")
	}
	if running, waiting := testutil.ToFloat64(s.running.(prometheus.Gauge)), testutil.ToFloat64(s.waitingGauge.(prometheus.Gauge)); running != 1 || waiting != 0 {
		t.Errorf("gauges: %v running, %v waiting; want 1 and 0", running, waiting)
	}
	// The one slot is still held by the first acquire, and comes back.
	s.release()
	if err := s.acquire(ctx, "c", 0, time.Time{}, cost{}, nil); err != nil {
		t.Errorf("slot lost after waiters gave up: %v", err)
	}
}

// A freed slot goes to the bot's oldest message, by when it first reached
// brainbot: a message redelivered from an instance that died (it reached
// the cluster before the others) comes here last but goes first, rather
// than waiting again behind this instance's own backlog. Messages as old
// keep their order of arrival.
func TestSlotsOldestFirst(t *testing.T) {
	s := newSlots(1, 10, time.Minute, newGauge(), newGauge())
	ctx := context.Background()
	if err := s.acquire(ctx, "a", 0, time.Time{}, cost{}, nil); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	granted := make(chan string, 4)
	for i, w := range []struct {
		name string
		age  time.Duration
	}{{"here first", 5 * time.Second}, {"here next", 6 * time.Second}, {"as old, after it", 6 * time.Second}, {"redelivered", 0}} {
		go func() {
			if err := s.acquire(ctx, "a", 0, base.Add(w.age), cost{}, nil); err != nil {
				t.Error(err)
				return
			}
			granted <- w.name
			s.release()
		}()
		waitFor(t, func() bool { return s.waiting("a") == i+1 })
	}
	s.release()
	var order []string
	for range 4 {
		order = append(order, <-granted)
	}
	if want := []string{"redelivered", "here first", "here next", "as old, after it"}; !slices.Equal(order, want) {
		t.Errorf("served %q, want %q", order, want)
	}
}

// Under saturation a conversation whose process is warm goes before the
// cold messages that came less than coldHandicap before it (its turn is
// a tenth of their start), and no earlier: a cold one waits at most that
// long behind later ones. Each kind keeps its order of age. A short
// BRAINBOT_MAX_WAIT bounds the handicap to a quarter of it: being passed
// never costs a request most of its wait, and the busy message. Warm ones
// go first within their bot's line only: bots still take turns, so a bot
// with warm conversations cannot hold back another's cold ones.
func TestSlotsWarmFirst(t *testing.T) {
	at := func(s int) time.Duration { return time.Duration(s) * time.Second }
	cold, warm := cost{}, cost{warm: true}
	for _, c := range []struct {
		name    string
		maxWait time.Duration
		line    []queued
		want    []string
	}{
		{"within the handicap", time.Minute, []queued{
			{"a", "cold", at(0), cold},
			{"a", "warm after it", at(1), warm},
			{"a", "cold next", at(2), cold},
			{"a", "warm later", at(5), warm},
			{"a", "warm too late", coldHandicap + at(1), warm},
		}, []string{"warm after it", "warm later", "cold", "warm too late", "cold next"}},
		{"a quarter of a short max wait", 8 * time.Second, []queued{
			{"a", "cold", at(0), cold},
			{"a", "warm 1s later", at(1), warm},
			{"a", "warm 3s later", at(3), warm},
		}, []string{"warm 1s later", "cold", "warm 3s later"}},
		{"bots in turn", time.Minute, []queued{
			{"a", "a cold", at(0), cold},
			{"a", "a warm", at(1), warm},
			{"a", "a warm too", at(2), warm},
			{"b", "b cold", at(3), cold},
		}, []string{"a warm", "b cold", "a warm too", "a cold"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got := servedOrder(t, newSlots(1, 10, c.maxWait, newGauge(), newGauge()), c.line)
				if !slices.Equal(got, c.want) {
					t.Errorf("served %q, want %q", got, c.want)
				}
			})
		})
	}
}

// queued is a request waiting for a slot, named for the test; after is
// how long after the first its message reached brainbot.
type queued struct {
	bot, name string
	after     time.Duration
	cost      cost
}

// servedOrder lines up the requests, one after the other, behind the one
// slot of s held, frees it, and returns their names in the order they
// were served. It runs in a synctest bubble.
func servedOrder(t *testing.T, s *slots, line []queued) []string {
	t.Helper()
	if err := s.acquire(t.Context(), "held", 0, time.Now(), cost{}, nil); err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	granted := make(chan string, len(line))
	for _, q := range line {
		go func() {
			if err := s.acquire(t.Context(), q.bot, 0, base.Add(q.after), q.cost, nil); err != nil {
				t.Error(err)
				return
			}
			granted <- q.name
			s.release()
		}()
		synctest.Wait() // in line before the next
	}
	s.release()
	var order []string
	for range line {
		order = append(order, <-granted)
	}
	return order
}

// A new conversation whose bot has a spare of its shape ready is nearly
// as cheap as a warm one: it goes before the cold messages that came
// less than coldHandicap before it. But a spare serves one: of several
// new conversations waiting, only as many go early as the bot has
// spares ready; the others wait their turn as cold ones.
func TestSlotsReadySpareIsCheap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := func(s int) time.Duration { return time.Duration(s) * time.Second }
		spares := func(n int) cost { return cost{spares: n} }
		got := servedOrder(t, newSlots(1, 10, time.Minute, newGauge(), newGauge()), []queued{
			{"a", "cold", at(0), cost{}},
			{"a", "new, a spare of two", at(1), spares(2)},
			{"a", "new, the other spare", at(2), spares(2)},
			{"a", "new, no spare left", at(3), spares(2)},
			{"a", "warm", at(4), cost{warm: true}},
		})
		want := []string{"new, a spare of two", "new, the other spare", "warm", "cold", "new, no spare left"}
		if !slices.Equal(got, want) {
			t.Errorf("served %q, want %q", got, want)
		}
	})
}

// A caller of guest requests may have one waiting for a bot's slot, as a
// user's private chat may: one person summoning the bot from many chats
// cannot fill the line everyone else waits in. Others wait as before.
func TestSlotsGuestShare(t *testing.T) {
	s := newSlots(1, 10, time.Minute, newGauge(), newGauge())
	ctx := context.Background()
	if err := s.acquire(ctx, "a", 0, time.Time{}, cost{}, nil); err != nil {
		t.Fatal(err)
	}
	granted := make(chan int64, 4)
	enter := func(caller int64) {
		go func() {
			if err := s.acquire(ctx, "a", caller, time.Time{}, cost{}, nil); err != nil {
				t.Error(err)
				return
			}
			granted <- caller
			s.release()
		}()
	}
	for i, caller := range []int64{7, 8, 0, 0} {
		enter(caller)
		waitFor(t, func() bool { return s.waiting("a") == i+1 })
	}
	// Turned away at once (a request let in would give up on its ended
	// context instead).
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.acquire(ended, "a", 7, time.Time{}, cost{}, nil); !errors.Is(err, errNoSlot) {
		t.Fatalf("a caller's second guest request waiting = %v, want errNoSlot", err)
	}
	s.release()
	var order []int64
	for range 4 {
		order = append(order, <-granted)
	}
	if order[0] != 7 || order[1] != 8 {
		t.Errorf("served %v, want the line in order", order)
	}
	// Once served, the caller may wait again.
	if err := s.acquire(ctx, "a", 0, time.Time{}, cost{}, nil); err != nil {
		t.Fatal(err)
	}
	enter(7)
	waitFor(t, func() bool { return s.waiting("a") == 1 })
	s.release()
	if caller := <-granted; caller != 7 {
		t.Errorf("served %d, want the caller's next request", caller)
	}
}

// A waiter granted the slot at the moment it gives up hands it on rather
// than losing it.
func TestSlotsGrantWhileGivingUp(t *testing.T) {
	s := newSlots(1, 5, time.Minute, newGauge(), newGauge())
	ctx := context.Background()
	if err := s.acquire(ctx, "a", 0, time.Time{}, cost{}, nil); err != nil {
		t.Fatal(err)
	}
	w := &waiter{granted: make(chan struct{})}
	s.lines["a"] = []*waiter{w}
	s.turns = []string{"a"}
	s.release() // grants w
	if s.leave("a", w) {
		t.Fatal("leave found a waiter that was already granted")
	}
	s.release() // what acquire does when leave reports a grant
	if err := s.acquire(ctx, "b", 0, time.Time{}, cost{}, nil); err != nil {
		t.Fatalf("slot lost: %v", err)
	}
}

// waitFor waits until cond holds (a goroutine got as far as the test
// needs): a hang fails after 30s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
