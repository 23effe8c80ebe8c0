package updater

import (
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Topics of the once-only events (state.Tracker.Once): each is sent once
// per object, state and value.
const (
	// noteWithheld: a withheld resize or template write, per target.
	noteWithheld = "withheld"
	// noteWaiting: a restarting resize waiting for a budget, per blocker; a
	// resize waiting for room on its node, per node.
	noteWaiting = "waiting"
	// noteDeferred: a resize Deferred for too long, per episode.
	noteDeferred = "deferred"
	// noteBoostForbidden: a boost annotation the updater may not remove,
	// per set of containers.
	noteBoostForbidden = "boost-forbidden"
	// noteCanary: a decrease waiting for the VPA's canaries, or held after
	// harm, per message.
	noteCanary = "canary"
	// noteBoostBackedOff: containers whose restarts are not boosted any
	// more, per set of containers.
	noteBoostBackedOff = "boost-backed-off"
	// noteJVMFloor: a JVM's memory kept at its heap floor, or not lowered
	// while its heap is unknown, per recommendation (while the pod is
	// tracked: not again as the resize goes through).
	noteJVMFloor = "jvm-floor"
)

// stateOf tells the state of a pod from a decision that sends nothing.
// record and memRecord are the pod's records after the decision.
func stateOf(d resize.Decision, record, memRecord *records.Record, st resize.Status) state.Pod {
	kept := func() state.Pod {
		if memRecord == nil {
			return state.Pod{State: state.PodMemoryLimitKept, Values: d.Target.String(), Message: d.Message}
		}
		return state.Pod{State: state.PodMemoryLimitKept, Values: memRecord.Attempted.String(), Message: memRecord.Message,
			Kind: memRecord.Kind, Since: memRecord.RecordedAt}
	}
	switch d.Reason {
	case resize.ReasonMemoryLimitUnsafe:
		return kept()
	case resize.ReasonJVMHeapFloor:
		return state.Pod{State: state.PodJVMHeapFloor, Values: d.Target.String(), Message: resize.DescribeFloored(d.Floored)}
	case resize.ReasonJVMHeapUnknown:
		return state.Pod{State: state.PodJVMHeapUnknown, Values: d.Target.String(), Message: resize.DescribeFloored(d.Floored)}
	case resize.ReasonUpToDate, resize.ReasonBelowThreshold, resize.ReasonReversalHeld:
		if memRecord != nil {
			return kept()
		}
		if len(d.Floored) > 0 {
			// What is left of the recommendation is the floor's.
			s := state.PodJVMHeapFloor
			if resize.FlooredUnknown(d.Floored) {
				s = state.PodJVMHeapUnknown
			}
			return state.Pod{State: s, Values: d.Target.String(), Message: resize.DescribeFloored(d.Floored)}
		}
	}
	if st, ok := heldState(d); ok {
		return st
	}
	switch d.Reason {
	case resize.ReasonPodNotRunning:
		return state.Pod{State: state.PodNotRunning, Message: d.Message}
	case resize.ReasonNoRecommendation:
		return state.Pod{State: state.PodNoRecommendation, Message: d.Message}
	case resize.ReasonUpToDate, resize.ReasonBelowThreshold, resize.ReasonReversalHeld:
		return state.Pod{State: state.PodResized}
	case resize.ReasonResizeDeferred:
		return state.Pod{State: state.PodDeferred, Since: st.Since, Message: st.Message}
	case resize.ReasonResizeInProgress, resize.ReasonResizeUnknown:
		return state.Pod{State: state.PodInProgress, Since: st.Since, Message: d.Message}
	case resize.ReasonResizeError:
		return state.Pod{State: state.PodError, Since: st.Since, Message: st.Message}
	case resize.ReasonDisruptionBudget:
		return state.Pod{State: state.PodWaiting, Message: d.Message}
	case resize.ReasonWaitingForNodeCapacity:
		return state.Pod{State: state.PodWaitingForNode, Message: d.Message}
	case resize.ReasonPodLevelBound:
		// What the recommendation asks beyond the pod-level values, which
		// cannot change in place.
		return state.Pod{State: state.PodInvalid, Values: d.Target.String(), Message: d.Message}
	case resize.ReasonCanaryWait:
		return state.Pod{State: state.PodCanaryWait, Message: d.Message}
	case resize.ReasonHeldAfterHarm:
		return state.Pod{State: state.PodHeldAfterHarm, Message: d.Message}
	}
	if record != nil {
		s := state.Pod{State: state.PodInfeasible, Values: record.Attempted.String(), Message: record.Message, Kind: record.Kind, Since: record.RecordedAt}
		if record.Kind == records.KindInvalid {
			s.State = state.PodInvalid
		}
		return s
	}
	return state.Pod{State: state.PodInProgress, Message: d.Message}
}
