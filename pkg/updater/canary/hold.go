package canary

// The hold: values harm was seen at after a resize that lowered them, held
// for the whole VPA; and the revert due to the pod that was harmed.

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Harm is harm seen after a resize that lowered values.
type Harm struct {
	Pod  types.UID
	Name string
	// From and To are what the resize lowered, before and after.
	From, To resources.Resources
	// Why says what harm, for the hold's message.
	Why string
}

// Harmed holds the values a resize lowered before harm was seen, for the
// whole VPA, and ends its round: no pod of the VPA is lowered to them, or
// below, until the recommendation rises above them or the hold ends.
// Harm while a hold stands joins it (the higher values held, from the
// higher values); harm at a value of the same container and resource as a
// hold that ended not longer ago than it lasted starts the next hold in a
// row, twice as long (records.HoldLength). The pod is due a revert to
// what it had (Revert) when it is still there. It returns the pods
// waiting, to be queued: they are decided again against the hold.
func (g *Gate) Harmed(owner records.Owner, h Harm, podLeft bool) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.ensure(owner, 0)
	now := g.clock.Now()
	held, from, n := h.To, h.From, 1
	active := g.holdNow(v)
	switch prev := v.hold; {
	case active != nil:
		held, from, n = resize.MergeMax(prev.Attempted, h.To), resize.MergeMax(prev.From, h.From), max(prev.Holds, 1)
	case prev != nil && sameValues(prev.Attempted, h.To):
		n = min(max(prev.Holds, 1)+1, records.MaxHolds)
	}
	v.hold = &records.Record{Kind: records.KindHarmHold, Attempted: held, From: from,
		Message: truncate(h.Name+": "+h.Why, maxHoldMessage), RecordedAt: now,
		Until: now.Add(records.HoldLength(n, g.cfg.HarmHold)), Holds: n}
	g.store.Put(owner, owner.UID, v.hold)
	g.endRound(v, h.Pod)
	if podLeft && len(h.From) > 0 {
		g.store.Put(owner, h.Pod, &records.Record{Kind: records.KindRevert, Attempted: h.To, From: h.From,
			Message: truncate(h.Why, maxHoldMessage), RecordedAt: now})
	} else {
		g.store.Delete(h.Pod)
	}
	return g.takeWaiting(v)
}

// sameValues tells whether to has a value of a container, list and
// resource that held has too.
func sameValues(held, to resources.Resources) bool {
	same := false
	resources.ForEachValue(held, to, func(_, _ string, _ corev1.ResourceName, h, t *resource.Quantity) {
		if h != nil && t != nil {
			same = true
		}
	})
	return same
}

// maxHoldMessage bounds what a hold's or a revert's record says.
const maxHoldMessage = 300

// holdNow returns the VPA's hold while it stands, nil once it has ended.
// An ended hold is kept (v.hold, and its record) until it is forgotten
// (records.Record.HoldRemembered): harm until then lengthens the next.
// Callers hold g.mu.
func (g *Gate) holdNow(v *vpaState) *records.Record {
	if v.hold == nil {
		return nil
	}
	now := g.clock.Now()
	if now.Before(g.HoldEnds(v.hold)) {
		return v.hold
	}
	if !now.Before(v.hold.HoldRemembered(g.cfg.HarmHold)) {
		v.hold = nil
		g.store.Delete(v.owner.UID)
	}
	return nil
}

// Revert tells whether a pod is due a revert after harm: what its resize
// lowered, from what, and the harm.
func (g *Gate) Revert(owner records.Owner, uid types.UID) (from, to resources.Resources, why string, ok bool) {
	r, ok := g.store.GetFor(owner, uid)
	if !ok || r.Kind != records.KindRevert {
		return nil, nil, "", false
	}
	return r.From, r.Attempted, r.Message, true
}

// Reverted notes that a pod's revert was sent (or is moot): its record
// goes.
func (g *Gate) Reverted(uid types.UID) {
	if r, ok := g.store.Get(uid); ok && r.Kind == records.KindRevert {
		g.store.Delete(uid)
	}
}

// Lift forgets the held values the recommendation (what desired returns:
// what a pod of the VPA would be given) has risen above, and the hold once
// none is left; and a proven round whose values it has risen above: a
// decrease back to them is tried on canaries again. It returns whether the
// VPA still has a hold. desiredFor is called only when the VPA has a hold or
// a proven round, so most decisions never compute it.
func (g *Gate) Lift(owner records.Owner, desiredFor func() resources.Resources) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok {
		v = g.ensure(owner, 0)
	}
	if v.hold == nil && (v.round == nil || !v.round.passed) {
		return false
	}
	desired := desiredFor()
	if r := v.round; r != nil && r.passed && risen(desired, r.to) {
		g.endRound(v, "")
	}
	hold := g.holdNow(v)
	if hold == nil {
		return false
	}
	left := resize.Without(hold.Attempted, func(c, list string, name corev1.ResourceName, q resource.Quantity) bool {
		want, ok := resize.Value(desired, c, list, name)
		return ok && want.Cmp(q) > 0
	})
	switch {
	case left == nil:
		v.hold = nil
		g.store.Delete(owner.UID)
		return false
	case !resources.Equal(left, hold.Attempted):
		from := resize.Without(hold.From, func(c, list string, name corev1.ResourceName, _ resource.Quantity) bool {
			_, ok := resize.Value(left, c, list, name)
			return !ok
		})
		v.hold = &records.Record{Kind: records.KindHarmHold, Attempted: left, From: from, Message: hold.Message,
			RecordedAt: g.clock.Now(), Until: g.HoldEnds(hold), Holds: hold.Holds}
		g.store.Put(owner, owner.UID, v.hold)
	}
	return true
}

// risen tells whether desired is above floor for any value both hold.
func risen(desired, floor resources.Resources) bool {
	above := false
	resources.ForEachValue(desired, floor, func(_, _ string, _ corev1.ResourceName, d, f *resource.Quantity) {
		if d != nil && f != nil && d.Cmp(*f) > 0 {
			above = true
		}
	})
	return above
}

// Hold returns the VPA's hold, if it has one that has not expired.
func (g *Gate) Hold(owner records.Owner) (*records.Record, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok {
		return nil, false
	}
	h := g.holdNow(v)
	return h, h != nil
}

// HoldEnds is when a hold ends.
func (g *Gate) HoldEnds(hold *records.Record) time.Time {
	return hold.HoldEnds(g.cfg.HarmHold)
}

// holdWhy says why held values are not lowered to.
func (g *Gate) holdWhy(hold *records.Record) string {
	s := fmt.Sprintf("held for the VPA after harm (%s) until the recommendation rises above %s, or %s",
		hold.Message, hold.Attempted.String(), stamp(g.HoldEnds(hold)))
	if hold.Holds > 1 {
		s += fmt.Sprintf(" (hold %d in a row: %s)", hold.Holds, records.HoldLength(hold.Holds, g.cfg.HarmHold))
	}
	return s
}

// Holds counts the VPAs with a hold, for the gauge.
func (g *Gate) Holds() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, v := range g.vpas {
		if g.holdNow(v) != nil {
			n++
		}
	}
	return n
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
