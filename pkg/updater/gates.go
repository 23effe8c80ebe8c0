package updater

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
)

// The gates of a pod's resize (pkg/updater/gate), in the one order they
// run; each is its rule's adapter, in the file of its rule. The first two
// hold back before the decision, as pure rules of pkg/resize; the others
// answer for the decided resize, and the last three take a place that is
// given back, in reverse order, when a later gate does not pass, and told
// what became of the resize once it was sent. A revert after harm meets
// only the emergency brake and the places it needs (room on its node, a
// place under the disruption budget when it restarts containers): no rule
// of time holds it back. The start or end of a CPU boost meets every gate
// but the evidence rule, the resize windows and the canary
// (docs/safety-after-resize.md#the-gates).
func (c *Controller) podGates() (*gate.Chain[*attempt], error) {
	return gate.New[*attempt](
		evidenceGate{c}, // the evidence rule (evidence.go)
		windowGate{c},   // resize windows (windows.go)
		brakeGate{c},    // the cluster-wide kill switch, --dry-run (pause.go)
		pauseGate{c},    // the VPA's pause, freezes (pause.go)
		canaryGate{c},   // canaries, the hold after harm (canarygate.go)
		roomGate{c},     // node room (capacity.go)
		budgetGate{c},   // the disruption budget (restart.go)
	)
}

var (
	_ gate.Holder[*attempt]   = evidenceGate{}
	_ gate.Holder[*attempt]   = windowGate{}
	_ gate.Admitter[*attempt] = brakeGate{}
	_ gate.Admitter[*attempt] = pauseGate{}
	_ gate.Admitter[*attempt] = canaryGate{}
	_ gate.Admitter[*attempt] = roomGate{}
	_ gate.Admitter[*attempt] = budgetGate{}
)

// attempt is one pod's resize on its way through the gates: what it is
// decided from, the decision, and what the gates found.
type attempt struct {
	pod *corev1.Pod
	vpa *vpatypes.VerticalPodAutoscaler
	in  resize.Input
	d   resize.Decision
	// boost: the resize starts or ends a CPU boost (at startup, or after
	// a restart).
	boost bool

	class   gate.Class
	classed bool

	// canary: the canary gate took a canary's place for the pod;
	// canaryUntil is when the pods waiting for the canaries may go, if
	// known; canarySent, that the canary's resize was sent (or may have
	// been).
	canary      bool
	canaryUntil time.Time
	canarySent  bool
	// budget is the disruption budget's refusal, nil when it did not
	// refuse.
	budget *disruption.Verdict
}

// Class says what the resize is now (gate.Attempt). Before the decision,
// only whether it is a revert or a boost is known.
func (a *attempt) Class() gate.Class {
	if !a.classed {
		c := gate.Class{Revert: a.in.Revert != "", Boost: a.boost}
		if a.d.Action == resize.ActionPatch {
			to, _ := resize.Lowered(resize.Current(a.pod, a.d.Target), a.d.Target)
			c.Lowers, c.Restarts = len(to) > 0, a.d.Disruptive
		}
		a.class, a.classed = c, true
	}
	return a.class
}

// decide takes the decision from the attempt's input, again when a gate
// changed it.
func (a *attempt) decide() {
	a.amend(resize.Decide(a.in))
}

// amend replaces the decision.
func (a *attempt) amend(d resize.Decision) {
	a.d, a.classed = d, false
}

// admit runs the gates that answer for a resize to be sent; a decision that
// sends nothing meets none.
func (c *Controller) admit(ctx context.Context, a *attempt) (gate.Verdict, *gate.Ticket[*attempt]) {
	if a.d.Action != resize.ActionPatch {
		return gate.Verdict{Answer: gate.Pass}, nil
	}
	return c.gates.Run(ctx, a)
}

// passed is a gate's Pass.
var passed = gate.Verdict{Answer: gate.Pass}
