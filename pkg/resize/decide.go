// Package resize holds the pure decisions of the InPlace updater: given a
// pod, what its VPA wants for it and what is remembered about earlier
// attempts, it returns what to do (patch, wait or skip) and why. It also
// builds the resize patch, reads the kubelet's resize status and classifies
// API errors. It has no client, no clock and no logger. Decide (decide.go)
// walks the flow below; what it compares (what a pod has and would get,
// whether a change matters, whether it restarts containers) is in
// change.go. DecideJob (job.go) is the same kind of decision for the pod
// template of a suspended Job.
//
// The flow follows AEP-8818 ("Complete Flow Description"), with the
// clarifications of this project: pending, in-progress, unknown and Error
// resizes are waited for and never patched again; values recorded as
// infeasible or invalid are compared with the values that would really be
// patched, after capping; memory limits are never lowered to the memory in
// use plus a margin, and a kubelet refusal to lower one is recorded and
// answered with one resize that keeps it (memory.go).
package resize

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Action is what to do with a pod.
type Action string

const (
	// ActionPatch: send Decision.Patch to the pod's resize subresource.
	ActionPatch Action = "Patch"
	// ActionWait: a resize is under way or must wait; do nothing now, the
	// pod's next status change brings it back.
	ActionWait Action = "Wait"
	// ActionSkip: nothing to do for this pod with this recommendation.
	ActionSkip Action = "Skip"
)

// Reason says why a decision was taken. Values are stable and used in logs,
// events and metrics.
type Reason string

const (
	ReasonPodNotRunning        Reason = "PodNotRunning"
	ReasonNoRecommendation     Reason = "NoRecommendation"
	ReasonUpToDate             Reason = "UpToDate"
	ReasonBelowThreshold       Reason = "BelowThreshold"
	ReasonResizeDeferred       Reason = "ResizeDeferred"
	ReasonResizeInProgress     Reason = "ResizeInProgress"
	ReasonResizeError          Reason = "ResizeError"
	ReasonResizeUnknown        Reason = "ResizeStateUnknown"
	ReasonInfeasible           Reason = "Infeasible"
	ReasonRecordedSame         Reason = "RecordedAttemptSame"
	ReasonRecordedNotLower     Reason = "RecordedAttemptNotLower"
	ReasonInvalid              Reason = "Invalid"
	ReasonDisruptionBudget     Reason = "DisruptionBudget"
	ReasonResize               Reason = "Resize"
	ReasonRetryLowerThanRecord Reason = "RetryLowerThanRecorded"
	// ReasonMemoryLimitKept: a resize is sent with one or more memory limits
	// kept at their running value, because lowering them is not safe.
	ReasonMemoryLimitKept Reason = "MemoryLimitKept"
	// ReasonMemoryLimitUnsafe: the only change would lower memory limits
	// that cannot be lowered safely; nothing is sent.
	ReasonMemoryLimitUnsafe Reason = "MemoryLimitUnsafe"
	// ReasonMemoryLimitRefused: the kubelet refused to lower memory limits;
	// the resize is sent again, once, with those limits kept.
	ReasonMemoryLimitRefused Reason = "MemoryLimitRefused"
	// ReasonReversalHeld: requests are inside the recommended range and the
	// change would move them back the way the pod's last resize came,
	// within Input.ReversalHold of it: a recommendation flapping between
	// two values does not resize the pod at every flap.
	ReasonReversalHeld Reason = "ReversalHeld"
	// ReasonCanaryWait: the change lowers values a canary of the VPA has
	// not been watched long enough with (Input.Gate); nothing else is to
	// change, or what is goes (ReasonResize, Decision.Gated).
	ReasonCanaryWait Reason = "CanaryWait"
	// ReasonHeldAfterHarm: the change lowers values to, or below, values
	// harm was seen at after an earlier resize of the VPA's pods (the
	// VPA's hold, Input.Gate).
	ReasonHeldAfterHarm Reason = "HeldAfterHarm"
	// ReasonRevert: harm was seen after a resize lowered values of this
	// pod; it is resized back to what it had (Input.Revert).
	ReasonRevert Reason = "Revert"
	// ReasonAwaitingEvidence: the recommendation does not rest on enough
	// usage to be acted on yet (evidence.go): nothing is sent.
	ReasonAwaitingEvidence Reason = "AwaitingEvidence"
	// ReasonOutsideWindow: the resize lowers resources or restarts
	// containers (or, with scope all, any resize) and its VPA's resize
	// window is closed: nothing is sent until it opens.
	ReasonOutsideWindow Reason = "OutsideResizeWindow"
	// ReasonDecreasesHeld: a resize is sent with its increases only; its
	// decreases wait for evidence or for the resize window.
	ReasonDecreasesHeld Reason = "DecreasesHeld"
	// ReasonJVMHeapFloor: the memory of a JVM container is kept at its
	// heap floor (heap + overhead) instead of the lower value recommended
	// (jvm.go); the rest of the resize is sent, or nothing is left to send.
	ReasonJVMHeapFloor Reason = "JVMHeapFloor"
	// ReasonJVMHeapUnknown: the memory of a JVM container whose heap is
	// unknown is not lowered in place; the rest of the resize is sent, or
	// nothing is left to send.
	ReasonJVMHeapUnknown Reason = "JVMHeapUnknown"
)

// Input is everything a decision depends on.
type Input struct {
	Pod *corev1.Pod
	// Desired is what the VPA wants for each container, after capping.
	Desired recommendation.Desired
	// Record is what is remembered of an earlier failed attempt, or nil.
	Record *records.Record
	// Threshold is the minimum relative change worth a resize
	// (--pod-update-threshold) when requests are inside the recommended range.
	Threshold float64
	// ServerMinor is the API server's minor version (33 for 1.33), or 0 when
	// unknown.
	ServerMinor int
	// DisruptionAllowed tells whether one more pod of this pod's workload may
	// have its containers restarted now (--eviction-tolerance).
	DisruptionAllowed bool
	// DisruptionRefused says what holds the restart back when
	// DisruptionAllowed is false ("" for the generic message).
	DisruptionRefused string
	// MemoryUsage is the memory in use by each container (the metrics API's
	// working set), nil or partial when unknown. Only consulted when a
	// memory limit would be lowered (NeedsMemoryUsage).
	MemoryUsage map[string]resource.Quantity
	// MemoryLimitMargin is --memory-limit-decrease-margin: a memory limit is
	// lowered only above usage x (1 + margin).
	MemoryLimitMargin float64
	// MemoryRecord holds memory limits that must not be lowered to, or
	// below (memory.go), or nil.
	MemoryRecord *records.Record
	// LastResize is the last resize sent to the pod, or nil when none is
	// known. With ReversalHold and Now, it damps a flapping recommendation.
	LastResize *LastResize
	// ReversalHold is how long after LastResize a change that only moves
	// requests back the way it came is held, while they stay inside the
	// recommended range; 0 holds nothing.
	ReversalHold time.Duration
	// Now is the time of the decision, compared with LastResize.At, the
	// VPA's age and the windows' openings.
	Now time.Time
	// NodeFeatures are the features the pod's node declares
	// (node.status.declaredFeatures); NodeKnown tells whether the node was
	// read. They say whether the pod's pod-level resources may change in
	// place (podlevel.go).
	NodeFeatures []string
	NodeKnown    bool
	// Gate holds decreases back (a canary not yet proven, a hold after
	// harm: safety.go); nil holds none.
	Gate *Gate
	// Revert, when set, says what harm the pod showed: Desired is then
	// what it had before the resize that harmed it (RevertDesired), sent
	// whatever the threshold and the reversal hold.
	Revert string
	// Evidence is what is known of the usage the recommendation rests on;
	// nil takes the recommendation as given (evidence.go).
	Evidence *Evidence
	// Windows are the VPA's resize windows at Now; the zero value holds
	// nothing (holdback.go).
	Windows Windows
	// JVM is what is known of the pod's JVMs (jvm.go): their memory is
	// not lowered in place under their heap floors. Nil: no JVM.
	JVM *JVM
}

// Decision is what to do and why.
type Decision struct {
	Action  Action
	Reason  Reason
	Message string
	// Target is what the pod's containers should get (cpu and memory
	// requests and limits of the containers the VPA controls), memory limits
	// that cannot be lowered safely kept (Held). Set when the recommendation
	// could be computed.
	Target resources.Resources
	// Patch is the strategic merge patch for the resize subresource (only
	// with ActionPatch).
	Patch []byte
	// Disruptive is true when the patch restarts containers (a changed
	// resource has resizePolicy RestartContainer).
	Disruptive bool
	// ClearRecord asks to forget the pod's record.
	ClearRecord bool
	// NewRecord asks to remember this record for the pod (replacing any).
	NewRecord *records.Record
	// Held lists the memory limits kept at their running value in Target
	// instead of the lower recommended ones.
	Held []HeldLimit
	// RecheckAfter, with ReasonReversalHeld, ReasonAwaitingEvidence and
	// ReasonOutsideWindow, is when the hold ends (or may have) and the pod
	// is worth deciding again; 0 when only a change of its objects can end
	// it.
	RecheckAfter time.Duration
	// NewMemoryRecord asks to remember this memory record for the pod
	// (replacing any); ClearMemoryRecord to forget it.
	NewMemoryRecord   *records.Record
	ClearMemoryRecord bool
	// Gated says which decreases the gate held back, and why, when the
	// rest of the change is sent (or waits: its reason is then the gate's).
	Gated string
	// Floored lists the JVM containers whose memory Target keeps at their
	// heap floors, or at what they run with while their heap is unknown
	// (jvm.go).
	Floored []JVMFloored
	// HeapNotes say, for each JVM container whose memory limit Target
	// raises, what becomes of its heap ("heap stays 1Gi until the
	// container restarts").
	HeapNotes []string
}

// Decide returns what to do with a pod.
func Decide(in Input) Decision {
	pod := in.Pod
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
		return Decision{Action: ActionSkip, Reason: ReasonPodNotRunning, Message: fmt.Sprintf("pod is %s", podPhase(pod))}
	}
	if len(in.Desired) == 0 {
		return Decision{Action: ActionSkip, Reason: ReasonNoRecommendation, Message: "no recommendation for any container of the pod"}
	}
	// Pod-level resources bound the containers: the target holds the
	// pod-level values that follow them, or container values kept within
	// them (podlevel.go).
	plan := planPodLevel(in, in.Record)
	recommended := plan.fit(pod, Target(pod, in.Desired))
	current := Current(pod, recommended)
	status := ReadStatus(pod)

	// Memory limits that cannot be lowered safely are taken out of the
	// target first: records are compared with, and patches made of, what
	// would really be sent. 1.33 forbids lowering them at all (Validate).
	checkMemory := in.ServerMinor != 33
	memRecord := in.MemoryRecord
	var newMemRecord *records.Record
	if status.State == StateMemoryLimitRefused && checkMemory {
		if refused := refusedLimits(pod); len(refused) > 0 {
			merged := mergeMemoryRecord(memRecord, refused, records.KindMemoryLimitRefused, status.Message)
			if !sameMemoryRecord(memRecord, merged) {
				newMemRecord, memRecord = merged, merged
			}
		}
	}
	// A JVM's memory is kept at its heap floor first: what usage and the
	// records allow is then judged of what would be sent.
	target, floored := in.JVM.applyFloors(pod, recommended)
	held := []HeldLimit(nil)
	if checkMemory {
		target, held = holdMemoryLimits(pod, target, in.MemoryUsage, in.MemoryLimitMargin, memRecord)
		target, held = plan.fitHeld(in, target, held, memRecord)
	}
	record := in.Record
	d := Decision{Target: target, Held: held, NewMemoryRecord: newMemRecord, Floored: floored}

	retryInfeasible, resendRefused := false, false
	switch status.State {
	case StateInfeasible:
		// The kubelet refused what is in the spec now: that is what was
		// attempted. Remember it, then see whether the target is worth a new
		// attempt against it.
		if record == nil || record.Kind == records.KindInvalid || !resources.Equal(record.Attempted, current) {
			record = &records.Record{Kind: records.KindInfeasible, Attempted: current, Message: status.Message}
			d.NewRecord = record
		}
		switch record.Compare(target) {
		case records.Same:
			return d.with(ActionSkip, ReasonInfeasible, "the kubelet reported the resize infeasible: "+status.Message)
		case records.NotLower:
			return d.with(ActionSkip, ReasonRecordedNotLower, "the kubelet reported the resize infeasible and the recommendation asks for no less: "+status.Message)
		}
		d.NewRecord, d.ClearRecord = nil, true
		retryInfeasible = true
	case StateDeferred:
		return d.with(ActionWait, ReasonResizeDeferred, "resize deferred by the kubelet: "+status.Message)
	case StateInProgress:
		return d.with(ActionWait, ReasonResizeInProgress, "resize in progress")
	case StateMemoryLimitRefused:
		// The kubelet keeps the whole resize stuck while it refuses to lower
		// a memory limit. Send it once more with those limits kept, so that
		// the rest completes: that resize lowers none of the limits refused,
		// and once it is in the spec, target and spec agree and nothing more
		// is sent.
		// Without a limit to keep (none found lowered, or it cannot be kept)
		// the kubelet's retries are waited for, as for any Error.
		if !checkMemory || len(held) == 0 || resources.Equal(current, target) {
			return d.with(ActionWait, ReasonResizeError, "resize failed on the node, the kubelet retries: "+status.Message)
		}
		resendRefused = true
	case StateError:
		return d.with(ActionWait, ReasonResizeError, "resize failed on the node, the kubelet retries: "+status.Message)
	case StateUnknown:
		return d.with(ActionWait, ReasonResizeUnknown, "resize state unknown ("+status.Reason+"): "+status.Message)
	}

	if record != nil && !retryInfeasible {
		switch record.Compare(target) {
		case records.Same:
			return d.with(ActionSkip, ReasonRecordedSame, fmt.Sprintf("%s already recorded for these values: %s", record.Kind, record.Message))
		case records.NotLower:
			return d.with(ActionSkip, ReasonRecordedNotLower, fmt.Sprintf("recommendation asks for no less than the values recorded as %s: %s", record.Kind, record.Message))
		}
		d.ClearRecord = true
	}

	if bound, ok := plan.bound(pod, d, current, recommended); ok && !resendRefused {
		return bound
	}
	if !resendRefused && resources.Equal(current, recommended) {
		return d.with(ActionSkip, ReasonUpToDate, "pod resources match the recommendation")
	}
	if !retryInfeasible && !resendRefused && in.Revert == "" {
		if matters, why := ChangeMatters(pod, in.Desired, in.Threshold); !matters {
			return d.with(ActionSkip, ReasonBelowThreshold, why)
		}
		if left, why := reversalHeld(in, current); left > 0 {
			d.RecheckAfter = left
			return d.with(ActionSkip, ReasonReversalHeld, why)
		}
	}
	kept := ""
	if !resendRefused && in.Revert == "" {
		// A revert undoes harm: neither the evidence rule nor a resize
		// window holds it back.
		var stop *Decision
		if target, kept, stop = holdBack(in, d, current, target); stop != nil {
			return *stop
		}
		d.Target = target
	}
	var gateReason Reason
	if gated, reason, why := in.Gate.apply(current, target); reason != "" {
		target, d.Target, d.Gated, gateReason = gated, gated, why, reason
		if resources.Equal(current, target) {
			if reason == ReasonCanaryWait {
				return d.with(ActionWait, reason, why)
			}
			return d.with(ActionSkip, reason, why)
		}
	}
	if len(held) > 0 && d.NewMemoryRecord == nil {
		d.NewMemoryRecord = usageRecord(memRecord, held)
	}
	if resources.Equal(current, target) && len(held) == 0 && len(floored) > 0 {
		reason, what := ReasonJVMHeapFloor, "nothing to resize but memory under a JVM's heap floor: "
		if FlooredUnknown(floored) {
			reason, what = ReasonJVMHeapUnknown, "nothing to resize but the memory of a JVM whose heap is unknown: "
		}
		return d.with(ActionSkip, reason, what+DescribeFloored(floored))
	}
	if resources.Equal(current, target) {
		return d.with(ActionSkip, ReasonMemoryLimitUnsafe, "nothing to resize but memory limits that cannot be lowered safely: "+heldString(held))
	}
	if msg := Validate(pod, target, in.ServerMinor); msg != "" {
		d.ClearRecord = false
		d.NewRecord = &records.Record{Kind: records.KindInvalid, Attempted: target, Message: msg}
		return d.with(ActionSkip, ReasonInvalid, msg)
	}
	d.Disruptive = IsDisruptive(pod, target)
	d.HeapNotes = in.JVM.heapNotes(pod, target)
	if d.Disruptive && !in.DisruptionAllowed {
		why := in.DisruptionRefused
		if why == "" {
			why = "the workload's eviction tolerance is used up"
		}
		return d.with(ActionWait, ReasonDisruptionBudget, "the resize restarts containers and waits for "+why)
	}
	patch, err := BuildPatch(pod, target)
	if err != nil {
		// Marshalling resource lists cannot fail; treat it as invalid input.
		d.NewRecord = &records.Record{Kind: records.KindInvalid, Attempted: target, Message: err.Error()}
		return d.with(ActionSkip, ReasonInvalid, err.Error())
	}
	d.Patch = patch
	// A resize that lowers no limit a memory record holds makes the record
	// moot: it is forgotten, as a successful resize forgets an infeasible one.
	d.ClearMemoryRecord = len(held) == 0 && in.MemoryRecord != nil
	reason, msg := ReasonResize, "resize to "+target.String()
	switch {
	case resendRefused:
		reason = ReasonMemoryLimitRefused
		msg = "the kubelet refused to lower memory limits (" + status.Message + "); resize to " + target.String() + ", " + heldString(held)
	case len(held) > 0:
		reason = ReasonMemoryLimitKept
		msg = "resize to " + target.String() + ", " + heldString(held)
	case len(floored) > 0:
		reason = ReasonJVMHeapFloor
		if FlooredUnknown(floored) {
			reason = ReasonJVMHeapUnknown
		}
		msg = "resize to " + target.String() + ", " + DescribeFloored(floored)
	case plan.capped:
		reason = ReasonPodLevelCapped
		msg = "resize to " + target.String() + "; " + plan.cappedMessage(pod)
	case retryInfeasible:
		reason = ReasonRetryLowerThanRecord
		msg = "recommendation lower than the infeasible values; resize to " + target.String()
	case in.Revert != "":
		reason = ReasonRevert
		msg = "harm after a resize that lowered values (" + in.Revert + "); resize back to " + target.String()
	}
	if len(held) > 0 && len(floored) > 0 {
		msg += "; " + DescribeFloored(floored)
	}
	if len(d.HeapNotes) > 0 {
		msg += "; " + strings.Join(d.HeapNotes, "; ")
	}
	if gateReason != "" {
		msg += "; " + d.Gated
	}
	if kept != "" {
		if reason == ReasonResize {
			reason = ReasonDecreasesHeld
		}
		msg += "; " + kept
	}
	return d.with(ActionPatch, reason, msg)
}

func (d Decision) with(a Action, r Reason, msg string) Decision {
	d.Action, d.Reason, d.Message = a, r, msg
	return d
}

func podPhase(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "terminating"
	case pod.Spec.NodeName == "":
		return "not scheduled"
	case pod.Status.Phase == "":
		return "in an unknown phase"
	default:
		return string(pod.Status.Phase)
	}
}
