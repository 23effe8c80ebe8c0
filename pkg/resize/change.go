package resize

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// What a decision compares: what a pod's containers have (Current,
// CurrentRequests, SpecOf) and would get (Target), whether the change
// matters (ChangeMatters) and whether it restarts containers (IsDisruptive,
// PendingRestart).

// Target merges desired into the pod's current container resources: for
// each container with a recommendation (app containers and sidecars,
// recommendation.Containers), cpu and memory requests (and limits when the
// VPA controls them) are replaced; everything else is kept.
// The result holds only cpu and memory.
func Target(pod *corev1.Pod, desired recommendation.Desired) resources.Resources {
	out := resources.Resources{}
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		want, ok := desired[c.Name]
		if !ok {
			continue
		}
		r := cpuMemory(c.Resources)
		for name, q := range want.Requests {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = q.DeepCopy()
		}
		for name, q := range want.Limits {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[name] = q.DeepCopy()
		}
		out[c.Name] = r
	}
	return out
}

func hasName(r resources.Resources, name string) bool {
	_, ok := r[name]
	return ok
}

// CurrentRequests returns the pod's spec cpu and memory requests (no
// limits) for the containers named in like, and its pod-level requests when
// like has them: what LastResize.From needs.
func CurrentRequests(pod *corev1.Pod, like resources.Resources) resources.Resources {
	out := resources.Resources{}
	for ref := range recommendation.Containers(pod) {
		if c := ref.Container; hasName(like, c.Name) {
			out[c.Name] = corev1.ResourceRequirements{Requests: cpuMemory(c.Resources).Requests}
		}
	}
	podLevelCurrent(pod, like, true, out)
	return out
}

// Current returns the pod's spec cpu and memory requests and limits for the
// containers named in like, and its pod-level ones when like has them
// (resources.PodLevel).
func Current(pod *corev1.Pod, like resources.Resources) resources.Resources {
	out := resources.Resources{}
	for ref := range recommendation.Containers(pod) {
		if c := ref.Container; hasName(like, c.Name) {
			out[c.Name] = cpuMemory(c.Resources)
		}
	}
	podLevelCurrent(pod, like, false, out)
	return out
}

func cpuMemory(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	var out corev1.ResourceRequirements
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := r.Requests[name]; ok {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[name] = q.DeepCopy()
		}
		if q, ok := r.Limits[name]; ok {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[name] = q.DeepCopy()
		}
	}
	return out
}

// ChangeMatters applies the updater's update threshold, as upstream VPA
// does: a change matters when a current request is outside the recommended
// range (or missing), or when the relative difference of requests, summed
// over resources (each resource totalled over containers), exceeds threshold.
// Requests are compared with the capped target, never with raw values.
func ChangeMatters(pod *corev1.Pod, desired recommendation.Desired, threshold float64) (bool, string) {
	outOfRange, diff, _ := requestChange(pod, desired, nil)
	if outOfRange || diff > threshold {
		return true, ""
	}
	return false, fmt.Sprintf("requests are inside the recommended range and differ by %.3f, not more than the threshold %.3f", diff, threshold)
}

// requestChange sums, per resource, the relative change of the requests of
// the containers the VPA recommends for, leaving out those skip names (it
// returns how many it left out that would change). outOfRange is true when
// a request is missing or outside the recommended range.
func requestChange(pod *corev1.Pod, desired recommendation.Desired,
	skip func(container string, name corev1.ResourceName, want resource.Quantity) bool) (outOfRange bool, diff float64, skipped int) {
	totalNow := map[corev1.ResourceName]float64{}
	totalWant := map[corev1.ResourceName]float64{}
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		want, ok := desired[c.Name]
		if !ok {
			continue
		}
		for name, target := range want.Requests {
			now, has := c.Resources.Requests[name]
			if !has {
				return true, 0, 0
			}
			if low, ok := want.LowerBound[name]; ok && now.Cmp(low) < 0 {
				return true, 0, 0
			}
			if up, ok := want.UpperBound[name]; ok && now.Cmp(up) > 0 {
				return true, 0, 0
			}
			if skip != nil && now.Cmp(target) != 0 && skip(c.Name, name, target) {
				skipped++
				target = now
			}
			totalNow[name] += float64(now.MilliValue())
			totalWant[name] += float64(target.MilliValue())
		}
	}
	for name, want := range totalWant {
		now := math.Max(totalNow[name], 1)
		diff += math.Abs(now-want) / now
	}
	return false, diff, skipped
}

// IsDisruptive reports whether applying target restarts a container: a
// changed resource whose resizePolicy is RestartContainer, its own or, for a
// container without a limit of its own, the pod-level limit.
func IsDisruptive(pod *corev1.Pod, target resources.Resources) bool {
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		t, ok := target[c.Name]
		if !ok {
			continue
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if policyFor(c, name) != corev1.RestartContainer {
				continue
			}
			if !sameValue(c.Resources.Requests, t.Requests, name) || !sameValue(c.Resources.Limits, t.Limits, name) {
				return true
			}
		}
	}
	return podLevelRestarts(pod, target)
}

// PendingRestart reports whether the pod's spec holds a resize the kubelet
// has not applied yet and that will restart a container: a resize is
// pending or under way (anything but none and Infeasible) and a resource
// whose resizePolicy is RestartContainer differs between the spec and what
// the container runs with (its status; a container that reports nothing
// differs).
func PendingRestart(pod *corev1.Pod) bool {
	switch ReadStatus(pod).State {
	case StateNone, StateInfeasible:
		return false
	}
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		var running corev1.ResourceRequirements
		if s := recommendation.Status(pod, ref); s != nil && s.Resources != nil {
			running = *s.Resources
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if policyFor(c, name) != corev1.RestartContainer {
				continue
			}
			if !sameRunning(name, c.Resources.Requests, running.Requests) || !sameRunning(name, c.Resources.Limits, running.Limits) {
				return true
			}
		}
	}
	return podLevelPendingRestart(pod)
}

// sameRunning compares a spec value with the one a container runs with,
// allowing for the kubelet's rounding of cpu.
func sameRunning(name corev1.ResourceName, spec, running corev1.ResourceList) bool {
	want, hasWant := spec[name]
	got, hasGot := running[name]
	if hasWant != hasGot {
		return false
	}
	return !hasWant || closeEnough(name, want, got)
}

// SpecOf renders the cpu and memory requests and limits of the pod's
// containers, init containers included, and its pod-level ones: a resize
// changes it, and a cached
// pod that still renders as it did when a resize was decided does not show
// that resize yet.
func SpecOf(pod *corev1.Pod) string {
	var b strings.Builder
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			b.WriteString(c.Name)
			for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					b.WriteByte(' ')
					if q, ok := l[name]; ok {
						b.WriteString(q.String())
					}
				}
			}
			b.WriteByte(';')
		}
	}
	podLevelSpec(pod, &b)
	return b.String()
}
