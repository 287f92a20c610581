package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"brainbot/cmd/internal/stack"
)

// The scaling case of `make bench`: the same load on 1, 2 and 3 instances
// sharing their bots through NATS, with a fake CLI taking 200 ms a turn,
// and the failover time of a killed instance.
const (
	scaleUsers = 50
	scalePer   = 6
	scaleTurn  = 200 * time.Millisecond
)

// scaleEnv bounds each instance like a small machine: 4 Claude slots, so
// that capacity grows with instances.
var scaleEnv = []string{"BRAINBOT_MAX_CLAUDE=4", "BRAINBOT_MAX_WARM=64", "BRAINBOT_NATS_PARTITIONS=12"}

// Each case runs once however often the benchmark is called (-benchtime
// 5x calls it twice): its numbers are kept.
var (
	scaleOnce   sync.Map // name → *sync.Once
	scaleResult sync.Map // name → map[string]float64
)

func once(b *testing.B, name string, run func() map[string]float64) {
	o, _ := scaleOnce.LoadOrStore(name, &sync.Once{})
	o.(*sync.Once).Do(func() { scaleResult.Store(name, run()) })
	v, ok := scaleResult.Load(name)
	if !ok {
		b.Fatal("no result")
	}
	for unit, x := range v.(map[string]float64) {
		b.ReportMetric(x, unit)
	}
	b.ReportMetric(0, "ns/op")
}

func BenchmarkClusterScaling(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("instances-%d", n), func(b *testing.B) {
			once(b, b.Name(), func() map[string]float64 {
				c := newCluster(b, []string{"alpha", "beta"}, scaleTurn)
				for i := range n {
					c.start(fmt.Sprintf("s%d", i), scaleEnv...)
				}
				c.settle(n)
				lat, elapsed := c.load(scaleUsers, scalePer)
				slices.Sort(lat)
				return map[string]float64{
					"msgs/s": float64(len(lat)) / elapsed.Seconds(),
					"p50-ms": float64(lat[len(lat)/2].Milliseconds()),
					"p99-ms": float64(lat[len(lat)*99/100].Milliseconds()),
				}
			})
		})
	}
	b.Run("failover", func(b *testing.B) {
		once(b, b.Name(), func() map[string]float64 {
			c := newCluster(b, []string{"alpha", "beta"}, scaleTurn)
			for i := range 3 {
				c.start(fmt.Sprintf("f%d", i), scaleEnv...)
			}
			c.settle(3)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); c.keepTalking(ctx, 30) }()
			time.Sleep(5 * time.Second)
			c.mu.Lock()
			victim := c.procs["f0"]
			c.mu.Unlock()
			on := conversationsOn(victim)
			killed := time.Now()
			c.kill("f0", syscall.SIGKILL)
			time.Sleep(20 * time.Second)
			cancel()
			<-done
			// From the kill to each of its conversations' next answer.
			var gaps []time.Duration
			for _, bot := range c.bots {
				for _, call := range c.tg.Sent(stack.Token(bot), "sendMessage") {
					if on[call.ChatID()] && call.Time.After(killed) {
						gaps = append(gaps, call.Time.Sub(killed))
						delete(on, call.ChatID())
					}
				}
			}
			if len(gaps) == 0 {
				b.Fatal("no conversation of the killed instance answered afterwards")
			}
			slices.Sort(gaps)
			return map[string]float64{
				"conversations":    float64(len(gaps)),
				"failover-p50-ms":  float64(gaps[len(gaps)/2].Milliseconds()),
				"failover-max-ms":  float64(gaps[len(gaps)-1].Milliseconds()),
				"unanswered-after": float64(len(on)),
			}
		})
	})
}

// settle waits until the n instances share the partitions among them
// (each consumes some) and the membership is quiet.
func (c *testCluster) settle(n int) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		owning := 0
		for _, in := range c.procs {
			taken := in.logs.count(func(l map[string]any) bool { return l["msg"] == "partition taken" })
			released := in.logs.count(func(l map[string]any) bool { return l["msg"] == "partition released" })
			if taken > released {
				owning++
			}
		}
		c.mu.Unlock()
		if owning == n {
			time.Sleep(2 * time.Second)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("the %d instances did not share the partitions", n)
}

// load has users (alternating between the bots) each send per messages,
// one after the other's answer, and returns every message's latency and
// the time it all took.
func (c *testCluster) load(users, per int) ([]time.Duration, time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	w := c.watch()
	defer w.stop()
	start := time.Now()
	for u := int64(3001); u < 3001+int64(users); u++ {
		wg.Go(func() {
			token := stack.Token(c.bots[u%int64(len(c.bots))])
			for k := 1; k <= per; k++ {
				sent := time.Now()
				c.tg.SendText(token, u, u, fmt.Sprintf("u%d-m%d", u, k))
				deadline := sent.Add(2 * time.Minute)
				for w.count(token, u) < k {
					if time.Now().After(deadline) {
						c.t.Errorf("user %d: message %d not answered", u, k)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				mu.Lock()
				lat = append(lat, time.Since(sent))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, time.Since(start)
}

// keepTalking has users send a message whenever the last was answered,
// until ctx ends.
func (c *testCluster) keepTalking(ctx context.Context, users int) {
	var wg sync.WaitGroup
	w := c.watch()
	defer w.stop()
	for u := int64(4001); u < 4001+int64(users); u++ {
		wg.Go(func() {
			token := stack.Token(c.bots[u%int64(len(c.bots))])
			for k := 1; ctx.Err() == nil; k++ {
				c.tg.SendText(token, u, u, fmt.Sprintf("u%d-m%d", u, k))
				for w.count(token, u) < k && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

// answerWatch counts the answers per bot and chat, from one goroutine
// scanning the stand-in's calls, so that many waiting users cost little.
type answerWatch struct {
	mu     sync.Mutex
	counts map[string]map[int64]int
	done   chan struct{}
}

func (c *testCluster) watch() *answerWatch {
	w := &answerWatch{counts: map[string]map[int64]int{}, done: make(chan struct{})}
	scan := func() {
		counts := map[string]map[int64]int{}
		for _, bot := range c.bots {
			token := stack.Token(bot)
			counts[token] = map[int64]int{}
			for _, call := range c.tg.Sent(token, "sendMessage") {
				if call.Code == 200 {
					counts[token][call.ChatID()]++
				}
			}
		}
		w.mu.Lock()
		w.counts = counts
		w.mu.Unlock()
	}
	scan()
	go func() {
		for {
			select {
			case <-w.done:
				return
			case <-time.After(5 * time.Millisecond):
				scan()
			}
		}
	}()
	return w
}

func (w *answerWatch) count(token string, chat int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[token][chat]
}

func (w *answerWatch) stop() { close(w.done) }
