package updater

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/jvm"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// JVMs (docs/jvm.md): the memory of a JVM container is lowered in place at
// most to its heap floor, and not at all while its heap is unknown
// (pkg/resize, jvm.go). The pod path reads the pod's JVMs from its spec and
// its VPA's annotation, keeps the memory limits they started with in the
// pod's records (records.StoreJVM), and reports what a floor kept.

// jvmOf reads the JVMs of pod and the memory limits they started with,
// and keeps those limits in the pod's records when they changed (a start
// seen for the first time). Nil when the pod runs no JVM.
func (c *Controller) jvmOf(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) *resize.JVM {
	j := resize.InspectJVMs(pod, vpa.Annotations)
	owner := ownerOf(vpa)
	rec, _ := c.jvmStore.GetFor(owner, pod.UID)
	if j != nil && j.Invalid != "" {
		c.reportJVMAnnotation(vpa, j.Invalid)
	}
	next := j.LimitsAtStart(pod, rec)
	switch {
	case next == nil && rec != nil:
		c.jvmStore.Delete(pod.UID)
	case next != nil && !resize.SameLimitsAtStart(rec, next):
		next.RecordedAt = c.now()
		c.jvmStore.Put(owner, pod.UID, next)
		klog.FromContext(ctx).V(2).Info("Recorded the memory limits JVMs started with", "vpa", klog.KObj(vpa), "limits", next.Attempted.String(), "restarts", next.Starts)
	}
	return j
}

// reportFloored sends, once per pod and recommendation, an event on the pod
// and on its VPA saying which memory of a JVM was not lowered as
// recommended, and why, and counts it.
func (c *Controller) reportFloored(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, d resize.Decision, desired recommendation.Desired) {
	if len(d.Floored) == 0 {
		return
	}
	what := resize.DescribeFloored(d.Floored)
	unknown := resize.FlooredUnknown(d.Floored)
	kind := flooredAtFloor
	if unknown {
		kind = flooredUnknown
	}
	if !c.tracker.OnceWhileTracked(pod.UID, noteJVMFloor, strings.Join([]string{flooredKey(desired), kind, what}, "\x00")) {
		return
	}
	c.metrics.JVMFloored(unknown)
	rest := "nothing else to resize"
	if d.Action == resize.ActionPatch {
		rest = "the rest of the resize is sent"
	}
	klog.FromContext(ctx).Info("Memory of a JVM not lowered as recommended", "vpa", klog.KObj(vpa), "floored", what, "action", d.Action)
	kind, reason, lead := corev1.EventTypeNormal, report.EventJVMHeapFloor, "memory of a JVM kept at its heap floor"
	if unknown {
		kind, reason, lead = corev1.EventTypeWarning, report.EventJVMHeapUnknown, "memory of a JVM not lowered in place"
	}
	c.recorder.Eventf(pod, kind, reason, "%s: %s; %s", capitalize(lead), what, rest)
	c.recorder.Eventf(vpa, kind, reason, "Pod %s: %s: %s; %s", pod.Name, lead, what, rest)
}

// What the note of a floor says: kept at the floor, or not lowered.
const (
	flooredAtFloor = "floor"
	flooredUnknown = "unknown"
)

// flooredKey names the recommendation a floor kept memory of: the memory
// requests it asks for, which the floor does not move (limits follow the
// requests in the ratio the pod runs with, a ratio the floor changes).
func flooredKey(desired recommendation.Desired) string {
	names := make([]string, 0, len(desired))
	for name := range desired {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		if q, ok := desired[name].Requests[corev1.ResourceMemory]; ok {
			fmt.Fprintf(&b, "%s=%s ", name, q.String())
		}
	}
	return b.String()
}

// flooredState is the state of a pod found with its recommendation (st,
// Resized) after a floor kept memory of a JVM of it: once the floor's
// limit is applied, the limit the recommendation gives follows it (the
// ratio the pod runs with), and the pod reads as up to date. While the
// recommendation is the one the floor kept memory of, the pod stays at its
// floor, and the condition says so.
func (c *Controller) flooredState(pod *corev1.Pod, desired recommendation.Desired, st state.Pod) state.Pod {
	if st.State != state.PodResized {
		return st
	}
	note, ok := c.tracker.Sent(pod.UID, noteJVMFloor)
	if !ok {
		return st
	}
	parts := strings.SplitN(note, "\x00", 3)
	if len(parts) != 3 || parts[0] != flooredKey(desired) {
		return st
	}
	s := state.PodJVMHeapFloor
	if parts[1] == flooredUnknown {
		s = state.PodJVMHeapUnknown
	}
	return state.Pod{State: s, Message: parts[2]}
}

// reportJVMAnnotation warns once per VPA and value about a JVM annotation
// that cannot be read.
func (c *Controller) reportJVMAnnotation(vpa *vpatypes.VerticalPodAutoscaler, problem string) {
	c.mu.Lock()
	if c.jvmWarned == nil {
		c.jvmWarned = map[string]string{}
	}
	seen := c.jvmWarned[string(vpa.UID)] == problem
	c.jvmWarned[string(vpa.UID)] = problem
	c.mu.Unlock()
	if !seen {
		c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventJVMAnnotationInvalid,
			"Annotation not read: %s; no memory of the VPA's pods is lowered in place until it can be", problem)
		c.enqueueCondition(vpaKey(vpa))
	}
}

// jvmAnnotationProblem is what the VPA's condition says of its JVM
// annotation, "" when it can be read or there is none.
func jvmAnnotationProblem(vpa *vpatypes.VerticalPodAutoscaler) string {
	value, ok := vpa.Annotations[jvm.Annotation]
	if !ok {
		return ""
	}
	if _, err := jvm.ParseAnnotation(value); err != nil {
		return fmt.Sprintf("Annotation not read: %v; no memory of the VPA's pods is lowered in place until it can be", err)
	}
	return ""
}
