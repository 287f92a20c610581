package jetstream

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
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
	if !slices.Contains(members, me) {
		members = append(slices.Clone(members), me)
	}
	type pair struct {
		score     uint64
		member    string
		partition int
	}
	pairs := make([]pair, 0, len(members)*partitions)
	for _, m := range members {
		for p := range partitions {
			sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", m, p))
			pairs = append(pairs, pair{binary.BigEndian.Uint64(sum[:8]), m, p})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.member, b.member), cmp.Compare(a.partition, b.partition))
	})
	share, extra := partitions/len(members), partitions%len(members)
	load := map[string]int{}
	taken := make([]bool, partitions)
	var mine []int
	for _, pr := range pairs {
		n := load[pr.member]
		if taken[pr.partition] || n > share || n == share && extra == 0 {
			continue
		}
		if n == share {
			extra--
		}
		taken[pr.partition] = true
		load[pr.member] = n + 1
		if pr.member == me {
			mine = append(mine, pr.partition)
		}
	}
	slices.Sort(mine)
	return mine
}
