package updater

import (
	"context"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
)

// canaryGate is the VPA's gate of decreases (safety.go, pkg/updater/canary):
// a decrease goes to the VPA's canaries first, and never to values held
// after harm. It may hold some of a resize's decreases back and let the
// rest go; a pod admitted as a canary takes the canary's place, kept once
// its resize is sent (or may have been: its record), given back otherwise.
type canaryGate struct{ c *Controller }

func (canaryGate) Name() string { return "canary" }

func (canaryGate) Scope() gate.Scope { return gate.Decreases }

func (g canaryGate) Admit(ctx context.Context, a *attempt) gate.Verdict {
	d, canary, until := g.c.admitDecrease(ctx, a.pod, a.vpa, &a.in, a.d)
	a.amend(d)
	a.canary, a.canaryUntil = canary, until
	if d.Action == resize.ActionPatch {
		return passed
	}
	// Nothing left to send now: the decreases wait for the canaries, or
	// are held after harm.
	if canary {
		g.c.releaseCanary(a.vpa, a.pod.UID)
		a.canary = false
	}
	return gate.Verdict{Answer: gate.Wait, Reason: string(d.Reason), Why: d.Gated, Until: until}
}

func (g canaryGate) Release(_ context.Context, a *attempt, o gate.Outcome) {
	if !a.canary {
		return
	}
	if !o.MayApply() {
		g.c.releaseCanary(a.vpa, a.pod.UID)
		return
	}
	to, from := resize.Lowered(resize.Current(a.pod, a.d.Target), a.d.Target)
	a.canarySent = g.c.canaries.Sent(ownerOf(a.vpa), a.pod.UID, from, to)
}
