package jetstream

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
)

// Assign spreads partitions over members and returns me's (me counts as
// a member). Every member computes the same from the same list, each
// partition goes to exactly one member, and each member gets within one of
// an even share (16 over 3: 6, 5 and 5).
//
// It ranks every (member, partition) pair by a hash of the two
// (rendezvous hashing) and, best pairs first, gives each partition to the
// first member of its ranking that still has room: a member's room is the
// even share, and the first members to reach it may take one more while
// partitions are left over. A member joining or leaving moves about its
// own share of partitions, and the few a changed share needs, not the
// whole ring.
func Assign(members []string, me string, partitions int) []int {
	items := make([]string, partitions)
	for p := range partitions {
		items[p] = strconv.Itoa(p)
	}
	var mine []int
	for p, m := range spread(members, me, items) {
		if m == me {
			mine = append(mine, p)
		}
	}
	return mine
}

// spread is Assign's rule for any items (partitions, bots): it returns
// each item's member, in the order of items.
func spread(members []string, me string, items []string) []string {
	if !slices.Contains(members, me) {
		members = append(slices.Clone(members), me)
	}
	type pair struct {
		score  uint64
		member string
		item   int
	}
	pairs := make([]pair, 0, len(members)*len(items))
	for _, m := range members {
		for i, it := range items {
			sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s", m, it))
			pairs = append(pairs, pair{binary.BigEndian.Uint64(sum[:8]), m, i})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.member, b.member), cmp.Compare(a.item, b.item))
	})
	share, extra := len(items)/len(members), len(items)%len(members)
	load := map[string]int{}
	owner := make([]string, len(items))
	for _, pr := range pairs {
		n := load[pr.member]
		if owner[pr.item] != "" || n > share || n == share && extra == 0 {
			continue
		}
		if n == share {
			extra--
		}
		owner[pr.item] = pr.member
		load[pr.member] = n + 1
	}
	return owner
}
