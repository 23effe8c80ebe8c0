package records

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The rules of a hold (KindHarmHold) that the updater, which sets and
// lifts it, and the admission controller, which gives new pods what it
// holds, both follow.

const (
	// MaxHolds bounds Record.Holds: a hold's length doubles with each, up
	// to MaxHoldLength, reached long before.
	MaxHolds = 16
	// MaxHoldLength bounds the length of a hold that doubled (HoldLength),
	// unless the first is longer.
	MaxHoldLength = 7 * 24 * time.Hour
	// DefaultHoldLength is the updater's default --harm-hold, the length
	// of a hold written before holds kept their end (Until) for those who
	// do not know the flag.
	DefaultHoldLength = 24 * time.Hour
)

// HoldLength is how long the n-th hold in a row of a VPA's values lasts:
// first, then twice as long with each, at most MaxHoldLength (or first,
// when it is longer).
func HoldLength(n int, first time.Duration) time.Duration {
	limit := max(MaxHoldLength, first)
	d := first
	for i := 1; i < min(n, MaxHolds) && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// HoldEnds is when a hold ends: its Until, or, for a hold written before
// holds kept it, first after it was made.
func (r *Record) HoldEnds(first time.Duration) time.Time {
	if !r.Until.IsZero() {
		return r.Until
	}
	return r.RecordedAt.Add(first)
}

// HoldRemembered is when a hold that has ended is forgotten: as long
// after its end as it lasted. Harm at its values until then is harm again
// from the same decrease, and the next hold lasts twice as long.
func (r *Record) HoldRemembered(first time.Duration) time.Time {
	return r.HoldEnds(first).Add(HoldLength(max(r.Holds, 1), first))
}

// IsHeld tells whether a hold's value holds q: q is at or below it. The
// updater's gate keeps a decrease to such a value back (the pod keeps
// what it has; resize.Gate calls this too), and the admission
// controller gives a new pod what the value was before the harm instead.
// A value above it is not held: the recommendation has risen above it.
func IsHeld(q, held resource.Quantity) bool { return q.Cmp(held) <= 0 }
