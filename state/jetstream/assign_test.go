package jetstream

import (
	"fmt"
	"slices"
	"testing"
)

// owners is who owns each partition when members share them.
func owners(t *testing.T, members []string, partitions int) map[int]string {
	t.Helper()
	owner := map[int]string{}
	for _, m := range members {
		for _, p := range Assign(members, m, partitions) {
			if o, dup := owner[p]; dup {
				t.Fatalf("%v: partition %d to %s and %s", members, p, o, m)
			}
			owner[p] = m
		}
	}
	if len(owner) != partitions {
		t.Fatalf("%v: %d of %d partitions assigned", members, len(owner), partitions)
	}
	return owner
}

// Every instance computes the same spread, each partition has one owner,
// and each owner has within one of an even share.
func TestAssignSpreadsEvenly(t *testing.T) {
	for _, partitions := range []int{1, 7, 8, 12, 16, 64, 1024} {
		for n := 1; n <= 7; n++ {
			var members []string
			for i := range n {
				members = append(members, fmt.Sprintf("bb%d", i))
			}
			load := map[string]int{}
			for _, m := range owners(t, members, partitions) {
				load[m]++
			}
			for _, m := range members {
				if l := load[m]; l != partitions/n && l != (partitions+n-1)/n {
					t.Errorf("%d partitions over %d members: %s has %d (loads %v)", partitions, n, m, l, load)
				}
			}
		}
	}
	var loads []int
	for _, m := range []string{"i0", "i1", "i2"} {
		loads = append(loads, len(Assign([]string{"i2", "i0", "i1"}, m, 16)))
	}
	slices.Sort(loads)
	if !slices.Equal(loads, []int{5, 5, 6}) {
		t.Errorf("16 partitions over 3: %v, want 6/5/5", loads)
	}
}

// A member leaving or joining moves its own share of partitions and few
// others.
func TestAssignMovesFew(t *testing.T) {
	const partitions = 64
	three := owners(t, []string{"a", "b", "c"}, partitions)
	two := owners(t, []string{"a", "b"}, partitions)
	four := owners(t, []string{"a", "b", "c", "d"}, partitions)
	moved := func(from, to map[int]string) int {
		n := 0
		for p, o := range from {
			if to[p] != o {
				n++
			}
		}
		return n
	}
	// c's share (21 or 22) must move; rebalancing 32/32 may move a few more.
	if n := moved(three, two); n > 22+3 {
		t.Errorf("c leaving moved %d of %d partitions", n, partitions)
	}
	// d takes its share of 16, and a few move to even out the rest.
	if n := moved(three, four); n > 16+3 {
		t.Errorf("d joining moved %d of %d partitions", n, partitions)
	}
}
