package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// RestartUnderWay tells, from the pod alone, whether a restart by a resize
// is under way: a resize that restarts a container is pending or in
// progress (resize.PendingRestart), or a container (app container or
// sidecar) that a resize of its cpu or memory restarts has restarted, and
// the pod is not Ready, or has been Ready for less than minReady since.
// since is when that restart is counted from. A new leader reserves these
// before it sends anything: the restarts the one before it sent are not
// over yet. A container that restarted for another reason (it crashed) is
// counted too: it is down, or only just back, all the same.
func RestartUnderWay(pod *corev1.Pod, minReady time.Duration, now time.Time) (since time.Time, ok bool) {
	if terminal(pod) || pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
		return time.Time{}, false
	}
	if resize.PendingRestart(pod) {
		return now, true
	}
	var started time.Time
	restarted := false
	for ref := range recommendation.Containers(pod) {
		if !restartsOnResize(ref.Container) {
			continue
		}
		s := recommendation.Status(pod, ref)
		if s == nil || s.RestartCount == 0 {
			continue
		}
		restarted = true
		if s.State.Running != nil && s.State.Running.StartedAt.After(started) {
			started = s.State.Running.StartedAt.Time
		}
	}
	if !restarted {
		return time.Time{}, false
	}
	if !podReady(pod) {
		return now, true
	}
	since = readySince(pod, now)
	if started.After(since) && !started.After(now) {
		// Restarted without the Ready condition showing it.
		since = started
	}
	if now.Sub(since) < minReady {
		return since, true
	}
	return time.Time{}, false
}

// restartsOnResize tells whether a resize of the container's cpu or memory
// restarts it.
func restartsOnResize(c *corev1.Container) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy == corev1.RestartContainer {
			return true
		}
	}
	return false
}
