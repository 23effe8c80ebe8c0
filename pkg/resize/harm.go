package resize

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// HarmKind says what harm a pod showed after its resize.
type HarmKind string

const (
	// HarmOOMKilled: a container was OOM-killed (its last termination, or
	// its state when it does not restart, says OOMKilled).
	HarmOOMKilled HarmKind = "OOMKilled"
	// HarmRestarted: a container's restart count rose, for another reason.
	HarmRestarted HarmKind = "Restarted"
	// HarmNotReady: the pod lost its Ready condition for longer than the
	// grace period.
	HarmNotReady HarmKind = "NotReady"
	// HarmEvicted: the kubelet evicted or killed the pod (status reason
	// Evicted, or a DisruptionTarget condition TerminationByKubelet).
	HarmEvicted HarmKind = "Evicted"
)

// HarmKinds lists every HarmKind, in the order metrics list them.
var HarmKinds = []HarmKind{HarmOOMKilled, HarmRestarted, HarmNotReady, HarmEvicted}

// Harm is what a pod showed after its resize.
type Harm struct {
	Kind HarmKind
	// Container is the container that was killed or restarted; "" for
	// the pod.
	Container string
	// Message says it in a sentence fragment: "container app OOMKilled
	// (exit code 137)".
	Message string
	// At is when it happened, when the pod tells (the time of the one
	// termination beyond the baseline); zero when it does not.
	At time.Time
}

// Baseline is what a pod showed when its resize completed: harm is what it
// shows beyond it. The zero Baseline knows nothing (a resize restored from
// a record).
type Baseline struct {
	// restarts are the restart counts of its init containers (sidecars
	// among them) and containers; a slice, as each watched pod keeps one
	// for its window.
	restarts []containerRestarts
}

type containerRestarts struct {
	name  string
	count int32
}

// Known tells whether the baseline was read from a pod.
func (b Baseline) Known() bool { return b.restarts != nil }

// restartsOf returns the restart count of the container named name.
func (b Baseline) restartsOf(name string) (int32, bool) {
	for _, r := range b.restarts {
		if r.name == name {
			return r.count, true
		}
	}
	return 0, false
}

// BaselineOf reads a pod's baseline.
func BaselineOf(pod *corev1.Pod) Baseline {
	b := Baseline{restarts: make([]containerRestarts, 0, len(pod.Status.InitContainerStatuses)+len(pod.Status.ContainerStatuses))}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range list {
			b.restarts = append(b.restarts, containerRestarts{name: s.Name, count: s.RestartCount})
		}
	}
	return b
}

// evictedReason is the pod status reason the kubelet's eviction manager
// sets; disruptionByKubelet the DisruptionTarget condition's reason when
// the kubelet terminates a pod (eviction, node shutdown).
const (
	evictedReason       = "Evicted"
	disruptionTarget    = corev1.DisruptionTarget
	disruptionByKubelet = "TerminationByKubelet"
	oomKilledReason     = "OOMKilled"
)

// HarmSince tells the harm a pod shows beyond its baseline, without the
// readiness (NotReadySince): the kubelet evicted or killed it, a container
// that does not restart was OOM-killed, or a container's restart count rose
// (OOMKilled when its last termination says so).
func HarmSince(pod *corev1.Pod, b Baseline) (Harm, bool) {
	if pod.Status.Reason == evictedReason {
		return Harm{Kind: HarmEvicted, Message: "pod evicted by the kubelet: " + bounded(pod.Status.Message)}, true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == disruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == disruptionByKubelet {
			return Harm{Kind: HarmEvicted, Message: "pod terminated by the kubelet: " + bounded(c.Message)}, true
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range list {
			if t := s.State.Terminated; t != nil && t.Reason == oomKilledReason {
				// Not restarted (restartPolicy Never or OnFailure, or
				// not yet): its state says it.
				if was, _ := b.restartsOf(s.Name); s.RestartCount == was && !t.FinishedAt.IsZero() {
					h := oomHarm(s.Name, t)
					h.At = t.FinishedAt.Time
					return h, true
				}
			}
			was, known := b.restartsOf(s.Name)
			if !known || s.RestartCount <= was {
				continue
			}
			// One restart beyond the baseline: its termination tells when.
			var at time.Time
			if t := s.LastTerminationState.Terminated; t != nil && s.RestartCount == was+1 {
				at = t.FinishedAt.Time
			}
			if t := s.LastTerminationState.Terminated; t != nil && t.Reason == oomKilledReason {
				h := oomHarm(s.Name, t)
				h.At = at
				return h, true
			}
			why := ""
			if t := s.LastTerminationState.Terminated; t != nil {
				why = fmt.Sprintf(" (last terminated: %s, exit code %d)", bounded(t.Reason), t.ExitCode)
			}
			return Harm{Kind: HarmRestarted, Container: s.Name, At: at,
				Message: fmt.Sprintf("container %s restarted %d times%s", s.Name, s.RestartCount-was, why)}, true
		}
	}
	return Harm{}, false
}

func oomHarm(container string, t *corev1.ContainerStateTerminated) Harm {
	return Harm{Kind: HarmOOMKilled, Container: container,
		Message: fmt.Sprintf("container %s OOMKilled (exit code %d) at %s", container, t.ExitCode, t.FinishedAt.UTC().Format(time.RFC3339))}
}

// NotReadySince tells since when a pod has not been Ready: the
// lastTransitionTime of its Ready condition when it is False (or Unknown),
// zero and false when it is Ready. A pod without the condition has not been
// Ready since an unknown time (zero, true).
func NotReadySince(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return time.Time{}, false
			}
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, true
}

// maxHarmDetail bounds what a kubelet's message adds to a harm's.
const maxHarmDetail = 200

func bounded(s string) string {
	if len(s) <= maxHarmDetail {
		return s
	}
	cut := maxHarmDetail
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
