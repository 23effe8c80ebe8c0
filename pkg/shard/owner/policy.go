package owner

import (
	"slices"
)

// Member is a live replica, as the membership Leases show it: the slot it
// holds and its identity.
type Member struct {
	Slot     int
	Identity string
}

// Target returns how many of the shards the replica self holds when the
// live replicas are members: the shards split evenly, the members of the
// lowest slots taking one more when they do not divide evenly, so that no
// replica holds more than ceil(shards / members) and the shares add up to
// the shards. A replica that is not a member holds none.
func Target(shards int, members []Member, self string) int {
	ordered := slices.Clone(members)
	slices.SortFunc(ordered, func(a, b Member) int { return a.Slot - b.Slot })
	ordered = slices.CompactFunc(ordered, func(a, b Member) bool { return a.Slot == b.Slot })
	rank := slices.IndexFunc(ordered, func(m Member) bool { return m.Identity == self })
	if rank < 0 {
		return 0
	}
	n := len(ordered)
	target := shards / n
	if rank < shards%n {
		target++
	}
	return target
}

// Extras returns the shards of held to give up to come down to target:
// the highest ones, so that what stays keeps merging into the same spans.
func Extras(held []int, target int) []int {
	if len(held) <= target {
		return nil
	}
	sorted := slices.Clone(held)
	slices.Sort(sorted)
	return sorted[max(target, 0):]
}
