package resize

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
)

// State is where a pod's resize stands, as reported by the kubelet.
type State string

const (
	// StateNone: no resize is pending or in progress; the pod runs with its
	// spec resources.
	StateNone State = "None"
	// StateDeferred: PodResizePending with reason Deferred. The kubelet
	// accepted the resize and waits for room on the node.
	StateDeferred State = "Deferred"
	// StateInfeasible: PodResizePending with reason Infeasible. The kubelet
	// will not apply the resize on this node.
	StateInfeasible State = "Infeasible"
	// StateInProgress: PodResizeInProgress without a reason: being actuated.
	StateInProgress State = "InProgress"
	// StateError: PodResizeInProgress with reason Error. Actuation failed and
	// the kubelet retries by itself.
	StateError State = "Error"
	// StateMemoryLimitRefused: PodResizeInProgress with reason Error because
	// the kubelet (1.34+) will not lower a memory limit to or below the
	// memory in use ("cannot decrease memory limits: ..."). The kubelet
	// retries the same spec at every pod sync, and keeps the whole resize
	// stuck until the usage falls, so it is not simply waited for.
	StateMemoryLimitRefused State = "MemoryLimitRefused"
	// StateUnknown: a resize may be in flight but its state cannot be told
	// (the kubelet has not observed the latest generation yet, an unknown
	// reason, or on 1.33 the reported resources differ from the spec).
	StateUnknown State = "Unknown"
)

// Status is a pod's resize state with the kubelet's words for it.
type Status struct {
	State   State
	Reason  string
	Message string
	// Since is when the kubelet entered this state: the lastTransitionTime
	// of its condition. Zero when unknown (the legacy status.resize field,
	// or states judged from the spec).
	Since time.Time
}

// ReadStatus reads the resize state of a pod, for Kubernetes 1.33 to 1.38:
//   - the PodResizePending and PodResizeInProgress conditions (1.33+);
//   - the deprecated status.resize field, which no release since 1.33 writes
//     but which is still served and tolerated here;
//   - without conditions, completion is judged from status.observedGeneration
//     where the kubelet reports it (1.34+, or 1.33 with
//     PodObservedGenerationTracking), otherwise by comparing
//     containerStatuses[].allocatedResources and .resources with the spec
//     (initContainerStatuses[] for sidecars).
func ReadStatus(pod *corev1.Pod) Status {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodResizePending || c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Reason {
		case corev1.PodReasonInfeasible:
			// The kubelet's verdict on the spec of the condition's
			// generation: it stays on the pod until the kubelet looks at a
			// resize sent since (seen on 1.34), which it does not refuse.
			if c.ObservedGeneration > 0 && c.ObservedGeneration < pod.Generation {
				return Status{State: StateUnknown, Reason: "GenerationNotObserved",
					Message: fmt.Sprintf("the kubelet's Infeasible is about generation %d; it has not observed generation %d yet", c.ObservedGeneration, pod.Generation)}
			}
			return Status{State: StateInfeasible, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
		case corev1.PodReasonDeferred:
			return Status{State: StateDeferred, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
		default:
			return Status{State: StateUnknown, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodResizeInProgress || c.Status != corev1.ConditionTrue {
			continue
		}
		if c.Reason == corev1.PodReasonError {
			state := StateError
			// A refusal is about the spec of the condition's generation. One
			// about an older spec (a resize sent since, which the kubelet has
			// not taken up yet) is not a refusal of the spec there is now.
			if IsMemoryLimitRefusal(c.Message) && (c.ObservedGeneration == 0 || c.ObservedGeneration >= pod.Generation) {
				state = StateMemoryLimitRefused
			}
			return Status{State: state, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
		}
		return Status{State: StateInProgress, Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time}
	}
	//nolint:staticcheck // the deprecated field is read on purpose.
	switch pod.Status.Resize {
	case "":
	case corev1.PodResizeStatusInfeasible:
		return Status{State: StateInfeasible, Reason: string(corev1.PodResizeStatusInfeasible), Message: "status.resize is Infeasible"}
	case corev1.PodResizeStatusDeferred:
		return Status{State: StateDeferred, Reason: string(corev1.PodResizeStatusDeferred), Message: "status.resize is Deferred"}
	case corev1.PodResizeStatusInProgress:
		return Status{State: StateInProgress, Reason: string(corev1.PodResizeStatusInProgress), Message: "status.resize is InProgress"}
	default:
		return Status{State: StateUnknown, Reason: string(pod.Status.Resize), Message: "status.resize is " + string(pod.Status.Resize)}
	}
	if pod.Status.ObservedGeneration > 0 {
		if pod.Status.ObservedGeneration < pod.Generation {
			return Status{State: StateUnknown, Reason: "GenerationNotObserved", Message: "the kubelet has not observed the latest pod spec yet"}
		}
		return Status{State: StateNone}
	}
	if msg, differs := statusDiffersFromSpec(pod); differs {
		return Status{State: StateUnknown, Reason: "ResourcesNotActuated", Message: msg}
	}
	return Status{State: StateNone}
}

// minCPULimit is the smallest CPU limit the kubelet actuates as such
// (MinMilliCPULimit); smaller limits are reported differently.
var minCPULimit = resource.MustParse("10m")

// statusDiffersFromSpec is the 1.33 completion check, without
// observedGeneration: allocated requests must equal the spec's, and actuated
// limits must equal the spec's, allowing for the kubelet's rounding of CPU.
func statusDiffersFromSpec(pod *corev1.Pod) (string, bool) {
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		st := recommendation.Status(pod, ref)
		if st == nil || st.State.Running == nil {
			continue
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if st.AllocatedResources != nil && !sameValue(c.Resources.Requests, st.AllocatedResources, name) {
				return "container " + c.Name + ": allocated " + string(name) + " request differs from spec", true
			}
			if st.Resources == nil {
				continue
			}
			want, hasWant := c.Resources.Limits[name]
			got, hasGot := st.Resources.Limits[name]
			if name == corev1.ResourceCPU && hasWant && want.Cmp(minCPULimit) < 0 {
				continue
			}
			if hasWant != hasGot || (hasWant && !closeEnough(name, want, got)) {
				return "container " + c.Name + ": actuated " + string(name) + " limit differs from spec", true
			}
		}
	}
	return "", false
}

func sameValue(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, oka := a[name]
	qb, okb := b[name]
	if oka != okb {
		return false
	}
	return !oka || qa.Cmp(qb) == 0
}

// closeEnough allows 1m of CPU for the kubelet's quota rounding.
func closeEnough(name corev1.ResourceName, want, got resource.Quantity) bool {
	if name != corev1.ResourceCPU {
		return want.Cmp(got) == 0
	}
	d := want.MilliValue() - got.MilliValue()
	return d >= -1 && d <= 1
}
