package resize

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// What is held back of a resize before it is sent: the decreases the
// evidence rule does not allow yet (evidence.go), then what the VPA's
// resize windows hold outside them. What is left, when it still matters,
// is sent now: the increases go, the decreases wait.

// Windows are a VPA's resize windows as they stand at Input.Now
// (pkg/updater/window reads them from the VPA and its namespace).
type Windows struct {
	// Decreases holds the resizes that lower a value or restart a
	// container.
	Decreases WindowHold
	// All holds every resize (scope all).
	All WindowHold
}

// WindowHold tells whether resizes must wait for a window now.
type WindowHold struct {
	Held bool
	// Until is when the window opens; zero when none opens within a week.
	Until time.Time
	// Why names the windows, for messages.
	Why string
}

// windowRecheck is when a pod whose window opens beyond a week is decided
// again: by then the week ahead has moved.
const windowRecheck = 24 * time.Hour

// holdBack applies the evidence rule and the resize windows to the change
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

	wait := func(w WindowHold, what string) *Decision {
		d.RecheckAfter = windowRecheck
		when := "no window opens within a week"
		if !w.Until.IsZero() {
			d.RecheckAfter = max(w.Until.Sub(in.Now), time.Second)
			when = "it opens at " + w.Until.UTC().Format(time.RFC3339)
		}
		out := d.with(ActionWait, ReasonOutsideWindow, what+" waits for its resize window ("+w.Why+"): "+when)
		return &out
	}
	if in.Windows.All.Held {
		return nil, "", wait(in.Windows.All, "the resize")
	}
	if dec := in.Windows.Decreases; dec.Held {
		lowers := func(string, corev1.ResourceName) (bool, bool) { return false, true }
		if kept := keepValues(current, target, lowers); !resources.Equal(kept, target) || IsDisruptive(in.Pod, target) {
			if IsDisruptive(in.Pod, kept) || !worthSending(in, current, kept) || Validate(in.Pod, kept, in.ServerMinor) != "" {
				what := "the resize lowers resources and"
				if IsDisruptive(in.Pod, target) {
					what = "the resize restarts containers and"
				}
				return nil, "", wait(dec, what)
			}
			target = kept
			when := "no window opens within a week"
			if !dec.Until.IsZero() {
				when = "it opens at " + dec.Until.UTC().Format(time.RFC3339)
			}
			notes = append(notes, "decreases wait for the resize window ("+dec.Why+"): "+when)
		}
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
