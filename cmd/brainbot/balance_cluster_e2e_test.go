package main

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Balanced (issue 38): with three instances and seven bots the poller
// leases spread over the instances (two or three each), although the first one started polled
// all seven; and after a NATS outage longer than the heartbeats' TTL,
// which every instance comes back from at its own pace, no partition
// changes hands (all three are back) and the leases spread again.
func TestClusterSpreadsAndSettlesAfterAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three brainbot processes")
	}
	bots := []string{"b1", "b2", "b3", "b4", "b5", "b6", "b7"}
	c := newCluster(t, bots, 0)
	admin := "BRAINBOT_HTTP_ADDR=127.0.0.1:0"
	first := c.start("i0", admin)
	c.waitLog(first, time.Minute, "polling every bot", func(l map[string]any) bool { return l["msg"] == "telegram bot polling" }, len(bots))
	ins := []*instance{first, c.start("i1", admin), c.start("i2", admin)}

	c.waitBalanced(ins, len(bots))
	moves := func() []int {
		var n []int
		for _, in := range ins {
			n = append(n, in.logs.count(func(l map[string]any) bool {
				return l["msg"] == "partition taken" || l["msg"] == "partition released"
			}))
		}
		return n
	}
	before := moves()
	c.outage(5 * time.Second)
	c.waitBalanced(ins, len(bots))
	if after := moves(); !slices.Equal(after, before) {
		t.Errorf("partitions taken or released by i0, i1, i2: %v before the outage, %v after: they moved", before, after)
	}
}

// readyLine is what /readyz says an instance polls and owns.
var readyLine = regexp.MustCompile(`polls bots \[([^\]]*)\], owns \d+ of (\d+) partitions \[([^\]]*)\]`)

// waitBalanced waits until the instances poll their share of the bots
// each (within one), every bot polled, and own the partitions between them, each
// one's logged (taken and not released since): the spread settled.
func (c *testCluster) waitBalanced(ins []*instance, bots int) {
	c.t.Helper()
	least, most := bots/len(ins), (bots+len(ins)-1)/len(ins)
	balanced := func() (bool, string) {
		polled, owned, partitions := 0, map[string]bool{}, ""
		var says []string
		for _, in := range ins {
			code, body := adminGet(c.t, in, "/readyz")
			m := readyLine.FindStringSubmatch(body)
			if code != http.StatusOK || m == nil {
				return false, body
			}
			says = append(says, m[0])
			mine, parts := strings.Fields(m[1]), strings.Fields(m[3])
			if len(mine) < least || len(mine) > most || !slices.Equal(parts, loggedPartitions(in)) {
				return false, strings.Join(says, "; ")
			}
			polled += len(mine)
			for _, p := range parts {
				owned[p] = true
			}
			partitions = m[2]
		}
		return polled == bots && fmt.Sprint(len(owned)) == partitions, strings.Join(says, "; ")
	}
	deadline := time.Now().Add(2 * time.Minute) // only a hang reaches it
	for {
		ok, says := balanced()
		if ok {
			c.t.Logf("balanced: %s", says)
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not balanced: %s", says)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loggedPartitions are the partitions in's log says it took and did not
// release since, in order.
func loggedPartitions(in *instance) []string {
	owned := map[int]bool{}
	in.logs.each(func(l map[string]any) {
		p, _ := l["partition"].(float64)
		switch l["msg"] {
		case "partition taken":
			owned[int(p)] = true
		case "partition released":
			delete(owned, int(p))
		}
	})
	var ps []int
	for p := range owned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprint(p)
	}
	return out
}
