package resize

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// The pod-level part of what the rest of the package answers for every
// pod (podlevel.go says what the pod-level values are and when they may
// change): whether a target is valid (Validate), what a pod has (Current,
// CurrentRequests, SpecOf), whether a change restarts containers
// (IsDisruptive, PendingRestart), the memory limits the kubelet refused to
// lower or that a resize would lower (memory.go), and the patch
// (BuildPatch).

// validatePodLevel checks target against the pod-level rules of the API
// server's resize validation (podlevel.go), with the pod-level values target
// gives the pod, or those it has. It returns "" when they hold.
func validatePodLevel(pod *corev1.Pod, target resources.Resources) string {
	if !recommendation.PodLevelSet(pod) {
		return ""
	}
	old := pod.Spec.Resources
	lvl := old
	if t, ok := target[resources.PodLevel]; ok {
		lvl = &t
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		for _, list := range []struct {
			what     string
			old, new corev1.ResourceList
		}{{"request", old.Requests, lvl.Requests}, {"limit", old.Limits, lvl.Limits}} {
			if _, had := list.old[r]; had {
				if _, has := list.new[r]; !has {
					return fmt.Sprintf("the pod-level %s %s cannot be removed in place", r, list.what)
				}
			}
		}
	}
	after := recommendation.Overlay(pod, withoutPodLevel(target))
	after.Spec.Resources = lvl
	agg := resourcehelper.AggregateContainerRequests(after, resourcehelper.PodResourcesOptions{})
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := lvl.Requests[r]
		lim, hasLim := lvl.Limits[r]
		if a, ok := agg[r]; ok && hasReq && a.Cmp(req) > 0 {
			return fmt.Sprintf("the containers' aggregate %s request %s would exceed the pod-level request %s", r, a.String(), req.String())
		}
		if hasReq && hasLim && req.Cmp(lim) > 0 {
			return fmt.Sprintf("the pod-level %s request %s would exceed the pod-level limit %s", r, req.String(), lim.String())
		}
		if !hasLim {
			continue
		}
		for i := range after.Spec.Containers {
			c := &after.Spec.Containers[i]
			if l, ok := c.Resources.Limits[r]; ok && l.Cmp(lim) > 0 {
				return fmt.Sprintf("container %s: %s limit %s would exceed the pod-level limit %s", c.Name, r, l.String(), lim.String())
			}
		}
	}
	if before, now := recommendation.LevelQOS(old), recommendation.LevelQOS(lvl); before != now {
		return fmt.Sprintf("the pod's QoS class would change from %s to %s, which resizing cannot do", before, now)
	}
	return ""
}

// podLevelCurrent returns the pod's pod-level cpu and memory requests and
// limits, as Current and CurrentRequests add them under resources.PodLevel
// when like has that entry.
func podLevelCurrent(pod *corev1.Pod, like resources.Resources, requestsOnly bool, out resources.Resources) {
	if _, ok := like[resources.PodLevel]; !ok || pod.Spec.Resources == nil {
		return
	}
	r := cpuMemory(*pod.Spec.Resources)
	if requestsOnly {
		r.Limits = nil
	}
	out[resources.PodLevel] = r
}

// podLevelRestarts tells whether changing the pod-level limits to what
// target gives them restarts a container: a container (or sidecar) without
// a limit of its own runs with the pod-level limit, and restarts when it
// changes if its resizePolicy for that resource is RestartContainer.
func podLevelRestarts(pod *corev1.Pod, target resources.Resources) bool {
	t, ok := target[resources.PodLevel]
	if !ok || pod.Spec.Resources == nil {
		return false
	}
	return inheritsChangedLimit(pod, target, pod.Spec.Resources.Limits, t.Limits)
}

// podLevelPendingRestart tells whether the pod-level limits of the spec
// differ from those the pod runs with (status.resources) for a resource a
// container inherits and restarts on: the resize under way restarts it.
func podLevelPendingRestart(pod *corev1.Pod) bool {
	if pod.Spec.Resources == nil || pod.Status.Resources == nil {
		return false
	}
	return inheritsChangedLimit(pod, nil, pod.Status.Resources.Limits, pod.Spec.Resources.Limits)
}

// inheritsChangedLimit tells whether a container or sidecar without a limit
// of its own (in target, or in the spec) of a resource whose pod-level limit
// differs between from and to has resizePolicy RestartContainer for it.
func inheritsChangedLimit(pod *corev1.Pod, target resources.Resources, from, to corev1.ResourceList) bool {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if sameValue(from, to, r) {
			continue
		}
		for _, c := range sidecarsAndContainers(pod) {
			if policyFor(c, r) != corev1.RestartContainer {
				continue
			}
			limits := c.Resources.Limits
			if t, ok := target[c.Name]; ok {
				limits = t.Limits
			}
			if own, ok := limits[r]; !ok || own.IsZero() {
				return true
			}
		}
	}
	return false
}

// podLevelRefused returns the pod-level memory limit of the spec when it is
// below the one the pod runs with (status.resources): the kubelet refused
// to lower it ("attempting to set pod memory limit (...) below current
// usage").
func podLevelRefused(pod *corev1.Pod, out resources.Resources) {
	if pod.Spec.Resources == nil || pod.Status.Resources == nil {
		return
	}
	spec, ok := pod.Spec.Resources.Limits[corev1.ResourceMemory]
	running, has := pod.Status.Resources.Limits[corev1.ResourceMemory]
	if !ok || !has || spec.Cmp(running) >= 0 {
		return
	}
	out[resources.PodLevel] = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: spec.DeepCopy()}}
}

// podLevelLowersMemoryLimit tells whether the pod-level values that follow
// desired lower the pod-level memory limit the pod runs with: the memory in
// use is then worth fetching.
func podLevelLowersMemoryLimit(pod *corev1.Pod, desired recommendation.Desired) bool {
	if !recommendation.PodLevelSet(pod) {
		return false
	}
	running, has := runningPodMemoryLimit(pod)
	if !has {
		return false
	}
	lvl := withPodLevel(pod, Target(pod, desired))[resources.PodLevel]
	want, ok := lvl.Limits[corev1.ResourceMemory]
	return ok && want.Cmp(running) < 0
}

// podLevelSpec renders the pod-level values for SpecOf.
func podLevelSpec(pod *corev1.Pod, b *strings.Builder) {
	if pod.Spec.Resources == nil {
		return
	}
	b.WriteString(resources.PodLevel)
	for _, l := range []corev1.ResourceList{pod.Spec.Resources.Requests, pod.Spec.Resources.Limits} {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			b.WriteByte(' ')
			if q, ok := l[name]; ok {
				b.WriteString(q.String())
			}
		}
	}
	b.WriteByte(';')
}

// sidecarsAndContainers returns the pod's sidecars (restartable init
// containers) and containers: those that run side by side.
func sidecarsAndContainers(pod *corev1.Pod) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// setPodLevelRequests gives pod (a copy) the pod-level requests target
// holds, for withRequests.
func setPodLevelRequests(pod *corev1.Pod, target resources.Resources) {
	t, ok := target[resources.PodLevel]
	if !ok || pod.Spec.Resources == nil {
		return
	}
	for name, q := range t.Requests {
		if pod.Spec.Resources.Requests == nil {
			pod.Spec.Resources.Requests = corev1.ResourceList{}
		}
		pod.Spec.Resources.Requests[name] = q
	}
}

// podLevelPatch returns the pod-level part of BuildPatch's patch: the
// pod-level cpu and memory requests and limits target holds, when they
// change; nil otherwise.
func podLevelPatch(pod *corev1.Pod, target resources.Resources) *resourcesPatchDoc {
	t, ok := target[resources.PodLevel]
	if !ok || pod.Spec.Resources == nil ||
		resources.Equal(resources.Resources{resources.PodLevel: cpuMemory(*pod.Spec.Resources)}, resources.Resources{resources.PodLevel: t}) {
		return nil
	}
	return &resourcesPatchDoc{Requests: t.Requests, Limits: t.Limits}
}
