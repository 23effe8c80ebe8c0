package resize

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Resize preemption (KEP-5836; alpha in Kubernetes 1.37, feature gate
// InPlacePodVerticalScalingSchedulerPreemption on the scheduler). The
// scheduler queues a pod whose resize the kubelet holds Deferred, checks
// the resize against its node only, and when it does not fit preempts pods
// of lower priority on that node, as it preempts for a new pod: it writes
// the victim's DisruptionTarget condition (reason PreemptionByScheduler),
// deletes it, and emits a Preempted event on it whose related object is
// the preemptor. The kubelet, seeing the victim go, retries the Deferred
// resize. Nothing is written on the Deferred pod itself in 1.37 (no
// nominatedNodeName, no PodScheduled condition, no FailedScheduling event:
// schedule_one.go handleSchedulingFailure returns early for it), so an
// attempt that finds no victim leaves no trace; the victims are what shows.

// PreemptedByScheduler tells whether the scheduler chose pod as a victim of
// a preemption: its DisruptionTarget condition is True with reason
// PreemptionByScheduler, written just before the pod is deleted. since is
// the condition's lastTransitionTime, zero when it has none.
func PreemptedByScheduler(pod *corev1.Pod) (since time.Time, ok bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// PodPriority is the pod's spec.priority, which admission sets from its
// PriorityClass; 0 (the default without one) when unset.
func PodPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority == nil {
		return 0
	}
	return *pod.Spec.Priority
}

// MayHavePreemptedFor tells whether the scheduler's resize preemption may
// have chosen victim for pod's resize: the pod's resize is Deferred, both
// are bound to the same node, the pod may preempt (its preemptionPolicy is
// not Never) and its priority is above the victim's. The scheduler's own
// word on whom it preempted for is its Preempted event on the victim; from
// the pods alone, a preemption for a new pod of higher priority bound for
// the same node at the same moment looks the same.
func MayHavePreemptedFor(pod, victim *corev1.Pod) bool {
	if pod.UID == victim.UID || pod.Spec.NodeName == "" || pod.Spec.NodeName != victim.Spec.NodeName {
		return false
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false
	}
	if PodPriority(pod) <= PodPriority(victim) {
		return false
	}
	return ReadStatus(pod).State == StateDeferred
}
