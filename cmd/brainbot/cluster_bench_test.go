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
		once(b, b.Name(), func() map[string]float64 { return failover(b) })
	})
	b.Run("handover", func(b *testing.B) {
		once(b, b.Name(), func() map[string]float64 { return handover(b) })
	})
	b.Run("nats-back", func(b *testing.B) {
		once(b, b.Name(), func() map[string]float64 { return natsBack(b) })
	})
	b.Run("kill-and-outage", func(b *testing.B) {
		once(b, b.Name(), func() map[string]float64 { return killAndOutage(b) })
	})
}

// failover: 30 users keep talking to 3 instances (a message always in
// flight) and 30 more said one thing and are idle; one instance is killed
// with SIGKILL and the idle users write again at once. The times from the
// kill to the next answer in each conversation of the killed instance:
// those with a message in flight, and those whose message came after.
func failover(b *testing.B) map[string]float64 {
	c := threeInstances(b, "f")
	const idle = int64(5001)
	w := c.watch()
	defer w.stop()
	for u := idle; u < idle+30; u++ {
		c.tg.SendText(c.token(u), u, u, fmt.Sprintf("u%d-m1", u))
	}
	c.waitAnswers(w, idle, 30, 1)
	stopTalking := c.talk()
	time.Sleep(3 * time.Second) // talk under way
	c.mu.Lock()
	on := conversationsOn(c.procs["f0"])
	c.mu.Unlock()
	killed := time.Now()
	c.kill("f0", syscall.SIGKILL)
	for u := idle; u < idle+30; u++ {
		c.tg.SendText(c.token(u), u, u, fmt.Sprintf("u%d-m2", u))
	}
	c.waitAnswers(w, idle, 30, 2)
	time.Sleep(15 * time.Second) // the talking ones go on
	stopTalking()
	next := c.nextAnswers(killed)
	var inFlight, after []time.Duration
	for chat := range on {
		gap, ok := next[chat]
		switch {
		case !ok:
			b.Errorf("conversation %d of the killed instance not answered again", chat)
		case chat >= idle:
			after = append(after, gap)
		default:
			inFlight = append(inFlight, gap)
		}
	}
	if len(inFlight) == 0 || len(after) == 0 {
		b.Fatalf("the killed instance had %d talking and %d idle conversations: the case proved nothing", len(inFlight), len(after))
	}
	return map[string]float64{
		"conversations":    float64(len(inFlight) + len(after)),
		"inflight-p50-ms":  pct(inFlight, 50),
		"inflight-p99-ms":  pct(inFlight, 99),
		"afterkill-p50-ms": pct(after, 50),
		"afterkill-p99-ms": pct(after, 99),
	}
}

// handover: 30 users keep talking to 3 instances; one is stopped with
// SIGTERM. Its conversations' longest wait between two answers around the
// stop, against the usual wait before it and after it (on two instances,
// each answer waits longer for a Claude slot).
func handover(b *testing.B) map[string]float64 {
	c := threeInstances(b, "h")
	stopTalking := c.talk()
	time.Sleep(4 * time.Second)
	c.mu.Lock()
	on := conversationsOn(c.procs["h0"])
	c.mu.Unlock()
	stopped := time.Now()
	c.kill("h0", syscall.SIGTERM)
	time.Sleep(8 * time.Second)
	stopTalking()
	var usual, stall, after []time.Duration
	for chat, times := range c.answerTimes() {
		if !on[chat] {
			continue
		}
		longest := time.Duration(0)
		for i := 1; i < len(times); i++ {
			gap := times[i].Sub(times[i-1])
			switch {
			case times[i].Before(stopped.Add(-time.Second)):
				usual = append(usual, gap)
			case times[i-1].Before(stopped.Add(3 * time.Second)):
				longest = max(longest, gap)
			default:
				after = append(after, gap)
			}
		}
		stall = append(stall, longest)
	}
	if len(stall) == 0 || len(usual) == 0 || len(after) == 0 {
		b.Fatal("the stopped instance had no conversations")
	}
	return map[string]float64{
		"conversations":    float64(len(stall)),
		"usual-gap-p50-ms": pct(usual, 50),
		"after-gap-p50-ms": pct(after, 50),
		"stop-gap-p50-ms":  pct(stall, 50),
		"stop-gap-p99-ms":  pct(stall, 99),
	}
}

// natsBack: 30 users keep talking to 3 instances; the nats-server stops
// for 10 s. The time from its restart to the first answer, and to each
// conversation's next answer; error replies counted.
func natsBack(b *testing.B) map[string]float64 {
	c := threeInstances(b, "n")
	stopTalking := c.talk()
	time.Sleep(3 * time.Second)
	c.server.Stop()
	time.Sleep(10 * time.Second) // the outage
	c.server.Restart()
	back := time.Now()
	time.Sleep(20 * time.Second)
	stopTalking()
	var gaps []time.Duration
	for _, gap := range c.nextAnswers(back) {
		gaps = append(gaps, gap)
	}
	if len(gaps) == 0 {
		b.Fatal("nothing answered after NATS came back")
	}
	errorReplies := 0
	for _, bot := range c.bots {
		for _, call := range c.tg.Sent(stack.Token(bot), "sendMessage") {
			if call.Code == 200 && !youSaid.MatchString(stack.Rendered(call)) {
				errorReplies++
			}
		}
	}
	return map[string]float64{
		"conversations":      float64(len(gaps)),
		"first-answer-ms":    pct(gaps, 0),
		"next-answer-p99-ms": pct(gaps, 99),
		"error-replies":      float64(errorReplies),
	}
}

// threeInstances starts two bots on three instances, prefix0 to prefix2,
// with a fake CLI taking scaleTurn, and waits until they share the work.
func threeInstances(b *testing.B, prefix string) *testCluster {
	c := newCluster(b, []string{"alpha", "beta"}, scaleTurn)
	for i := range 3 {
		c.start(fmt.Sprintf("%s%d", prefix, i), scaleEnv...)
	}
	c.settle(3)
	return c
}

// talk has 30 users keep talking (keepTalking) until stop is called.
func (c *testCluster) talk() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.keepTalking(ctx, 4001, 30) }()
	return func() {
		cancel()
		<-done
	}
}

// pct is the p-th percentile of d, in milliseconds.
func pct(d []time.Duration, p int) float64 {
	slices.Sort(d)
	return float64(d[min(len(d)-1, len(d)*p/100)].Milliseconds())
}

func (c *testCluster) token(user int64) string { return stack.Token(c.bots[user%int64(len(c.bots))]) }

// waitAnswers waits until users from first on have n answers each.
func (c *testCluster) waitAnswers(w *answerWatch, first int64, users, n int) {
	deadline := time.Now().Add(time.Minute)
	for u := first; u < first+int64(users); u++ {
		for w.count(c.token(u), u) < n {
			if time.Now().After(deadline) {
				c.t.Fatalf("user %d: answer %d not sent", u, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// answerTimes are when each private chat got its answers, in order.
func (c *testCluster) answerTimes() map[int64][]time.Time {
	out := map[int64][]time.Time{}
	for _, bot := range c.bots {
		for _, call := range c.tg.Sent(stack.Token(bot), "sendMessage") {
			if call.Code == 200 {
				out[call.ChatID()] = append(out[call.ChatID()], call.Time)
			}
		}
	}
	for _, times := range out {
		slices.SortFunc(times, time.Time.Compare)
	}
	return out
}

// nextAnswers is, per chat, the time from since to its first answer after.
func (c *testCluster) nextAnswers(since time.Time) map[int64]time.Duration {
	out := map[int64]time.Duration{}
	for chat, times := range c.answerTimes() {
		for _, at := range times {
			if at.After(since) {
				out[chat] = at.Sub(since)
				break
			}
		}
	}
	return out
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

// keepTalking has users from first on send a message whenever the last
// was answered, until ctx ends.
func (c *testCluster) keepTalking(ctx context.Context, first int64, users int) {
	var wg sync.WaitGroup
	w := c.watch()
	defer w.stop()
	for u := first; u < first+int64(users); u++ {
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
