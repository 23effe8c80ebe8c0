package recommendation

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Pod-level resources (spec.resources, KEP-2837) bound a pod's containers:
// the API server refuses a pod whose containers' aggregate requests exceed
// its pod-level requests, or one of whose containers has a limit above the
// pod-level limit; and when pod-level values are set, they, not the
// containers', are what the scheduler and the kubelet reserve for the pod
// and what decides its QoS class.
//
// The VPA's recommendation is per container (upstream's recommender has no
// pod-level recommendation yet: that is AEP-7571's), and it is applied to
// containers as for any pod, with two rules of this file, shared by the
// admission controller and the updater so that a pod gets the same values
// whether it is mutated at creation or resized in place:
//
//   - SharedAtPodLevel: a container that sets neither a request nor a limit
//     of a resource the pod sets at pod level shares the pod's: it is not
//     given the VPA's values of that resource. Giving it a request would
//     split what the pod shares (CPU weights, the OOM score) and, at
//     creation, change what the pod's own requests default to.
//   - PodLevelFor: the pod-level values follow the containers. A pod-level
//     request moves by as much as the containers' aggregate request moves
//     (the pod keeps the room it holds beyond its containers' requests, for
//     the containers that share it) and never below that aggregate; a
//     pod-level limit keeps its ratio to the pod-level request, as upstream
//     keeps a container's limit in proportion to its request, and is never
//     below a container's limit nor the pod-level request; a pod whose
//     pod-level requests equal its limits (Guaranteed) keeps them equal.
//
// Whether the pod-level values may move in place depends on the Kubernetes
// version and the node (pkg/resize); at creation they always may.

// PodLevelSet tells whether pod has pod-level requests or limits.
func PodLevelSet(pod *corev1.Pod) bool {
	return resourcehelper.IsPodLevelResourcesSet(pod)
}

// setsOwn tells whether a container sets a request or a limit of r itself.
func setsOwn(c *corev1.Container, r corev1.ResourceName) bool {
	_, req := c.Resources.Requests[r]
	_, lim := c.Resources.Limits[r]
	return req || lim
}

// sharedByPod returns, for a pod with pod-level resources, the cpu and
// memory its containers may share: those set at pod level.
func sharedByPod(pod *corev1.Pod) []corev1.ResourceName {
	if !PodLevelSet(pod) {
		return nil
	}
	var out []corev1.ResourceName
	for _, r := range fitResources {
		_, req := pod.Spec.Resources.Requests[r]
		_, lim := pod.Spec.Resources.Limits[r]
		if req || lim {
			out = append(out, r)
		}
	}
	return out
}

// SharedAtPodLevel returns desired without the values of the resources each
// container shares at pod level (see above). desired is not changed; it is
// returned as it is when nothing is left out.
func SharedAtPodLevel(pod *corev1.Pod, desired Desired) Desired {
	shared := sharedByPod(pod)
	if len(shared) == 0 || len(desired) == 0 {
		return desired
	}
	var out Desired
	visit := func(c *corev1.Container) {
		want, ok := desired[c.Name]
		if !ok {
			return
		}
		var drop []corev1.ResourceName
		for _, r := range shared {
			if setsOwn(c, r) {
				continue
			}
			_, req := want.Requests[r]
			_, lim := want.Limits[r]
			if req || lim {
				drop = append(drop, r)
			}
		}
		if len(drop) == 0 {
			return
		}
		if out == nil {
			out = maps.Clone(desired)
		}
		kept := Container{Requests: maps.Clone(want.Requests), Limits: maps.Clone(want.Limits),
			LowerBound: maps.Clone(want.LowerBound), UpperBound: maps.Clone(want.UpperBound)}
		for _, r := range drop {
			delete(kept.Requests, r)
			delete(kept.Limits, r)
			delete(kept.LowerBound, r)
			delete(kept.UpperBound, r)
		}
		if len(kept.Requests) == 0 && len(kept.Limits) == 0 {
			delete(out, c.Name)
			return
		}
		out[c.Name] = kept
	}
	for i := range pod.Spec.InitContainers {
		visit(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		visit(&pod.Spec.Containers[i])
	}
	if out == nil {
		return desired
	}
	return out
}

// Overlay returns a copy of pod whose containers and init containers named
// in values have the cpu and memory requests and limits values give them;
// their other values, and the other containers, stay as they are. The
// pod-level values are not changed (values' PodLevel entry is ignored).
func Overlay(pod *corev1.Pod, values resources.Resources) *corev1.Pod {
	out := pod.DeepCopy()
	apply := func(cs []corev1.Container) {
		for i := range cs {
			v, ok := values[cs[i].Name]
			if !ok {
				continue
			}
			r := &cs[i].Resources
			for name, q := range v.Requests {
				if r.Requests == nil {
					r.Requests = corev1.ResourceList{}
				}
				r.Requests[name] = q.DeepCopy()
			}
			for name, q := range v.Limits {
				if r.Limits == nil {
					r.Limits = corev1.ResourceList{}
				}
				r.Limits[name] = q.DeepCopy()
			}
		}
	}
	apply(out.Spec.InitContainers)
	apply(out.Spec.Containers)
	return out
}

// DesiredValues returns the requests and limits desired gives each
// container, as Overlay takes them.
func DesiredValues(desired Desired) resources.Resources {
	out := make(resources.Resources, len(desired))
	for name, c := range desired {
		out[name] = corev1.ResourceRequirements{Requests: c.Requests, Limits: c.Limits}
	}
	return out
}

// PodLevelFor returns the pod-level requests and limits of before once its
// containers are those of after (the same pod with other container values),
// by the rules above; nil when before has none. A pod-level request that
// is not set is left unset: the API server defaults it at creation. Values
// that do not move keep their quantity as it is.
func PodLevelFor(before, after *corev1.Pod) *corev1.ResourceRequirements {
	if !PodLevelSet(before) {
		return nil
	}
	p := before.Spec.Resources
	out := p.DeepCopy()
	aggBefore := resourcehelper.AggregateContainerRequests(before, resourcehelper.PodResourcesOptions{})
	aggAfter := resourcehelper.AggregateContainerRequests(after, resourcehelper.PodResourcesOptions{})
	guaranteed := LevelQOS(p) == corev1.PodQOSGuaranteed
	for _, r := range fitResources {
		req, hasReq := p.Requests[r]
		lim, hasLim := p.Limits[r]
		if !hasReq && !hasLim {
			continue
		}
		agg := amount(r, aggAfter[r])
		// What the pod-level request is, or will default to.
		newReq := agg
		if hasReq {
			newReq = max(saturatingAdd(amount(r, req), agg-amount(r, aggBefore[r])), agg)
			setAmount(out.Requests, r, req, newReq)
		}
		if !hasLim {
			continue
		}
		newLim := amount(r, lim)
		if hasReq && amount(r, req) > 0 && newReq != amount(r, req) {
			newLim = mulDiv(amount(r, lim), newReq, amount(r, req), true)
		}
		newLim = max(newLim, newReq, maxContainerLimit(after, r))
		if guaranteed && hasReq {
			newLim = max(newLim, newReq)
			setAmount(out.Requests, r, req, newLim)
		}
		setAmount(out.Limits, r, lim, newLim)
	}
	return out
}

// setAmount sets r in list to v, keeping was when it is v already.
func setAmount(list corev1.ResourceList, r corev1.ResourceName, was resource.Quantity, v int64) {
	if amount(r, was) == v {
		list[r] = was
		return
	}
	list[r] = quantityOf(r, v)
}

// maxContainerLimit is the highest limit of r of the pod's containers (the
// API server compares each with the pod-level limit; init containers are
// not compared), 0 when none has one.
func maxContainerLimit(pod *corev1.Pod, r corev1.ResourceName) int64 {
	var m int64
	for i := range pod.Spec.Containers {
		if q, ok := pod.Spec.Containers[i].Resources.Limits[r]; ok {
			m = max(m, amount(r, q))
		}
	}
	return m
}

// LevelQOS is the QoS class the pod-level resources p give a pod, as the API
// server computes it when they are set (qos.ComputePodQOS): per resource, a
// request (zero when missing) equal to a non-zero limit is Guaranteed, both
// zero BestEffort, anything else Burstable; the pod's class is the one
// class cpu and memory agree on, else Burstable.
func LevelQOS(p *corev1.ResourceRequirements) corev1.PodQOSClass {
	if p == nil || len(p.Requests)+len(p.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	var class corev1.PodQOSClass
	for _, r := range fitResources {
		req, lim := p.Requests[r], p.Limits[r]
		var this corev1.PodQOSClass
		switch {
		case req.Cmp(lim) != 0:
			this = corev1.PodQOSBurstable
		case req.IsZero():
			this = corev1.PodQOSBestEffort
		default:
			this = corev1.PodQOSGuaranteed
		}
		switch {
		case this == corev1.PodQOSBurstable:
			return this
		case class == "":
			class = this
		case class != this:
			return corev1.PodQOSBurstable
		}
	}
	return class
}

func saturatingAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return 1 << 62
	case a < 0 && b < 0 && s >= 0:
		return -(1 << 62)
	}
	return s
}
