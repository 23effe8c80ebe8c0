package resize

import (
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// What is held back of a resize before it is sent: the decreases the
// evidence rule does not allow yet (evidence.go). What is left, when it
// still matters, is sent now: the increases go, the decreases wait.

// holdBack applies the evidence rule to the change
// from current to target. It returns the target to send (the decreases it
// holds kept at their current values) and the note saying what waits, or
// stop with the decision to return when nothing is left to send now.
func holdBack(in Input, d Decision, current, target resources.Resources) (resources.Resources, string, *Decision) {
	var notes []string
	if h := weighEvidence(in, current, target); !h.empty() {
		kept := keepValues(current, target, h.keeps)
		if !worthSending(in, current, kept) || Validate(in.Pod, kept, in.ServerMinor) != "" {
			d.RecheckAfter = h.recheck
			w := d.with(ActionWait, ReasonAwaitingEvidence, "the recommendation is not acted on yet: "+h.message())
			return nil, "", &w
		}
		target = kept
		notes = append(notes, "decreases wait for evidence: "+h.message())
	}

	note := ""
	for i, n := range notes {
		if i > 0 {
			note += "; "
		}
		note += n
	}
	return target, note, nil
}
