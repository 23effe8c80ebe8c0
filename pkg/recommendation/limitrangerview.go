package recommendation

import (
	corev1 "k8s.io/api/core/v1"
)

// LimitRanger mutates a pod before it checks it, on create and on a resize
// alike: every container and init container that lacks a request or a
// limit gets the LimitRange's default one (spec.limits[].defaultRequest,
// default). The API server stores a LimitRange with its container items'
// defaults filled in: a default limit is the item's max where unset, a
// default request the default limit, else the min. A pod created in the
// namespace already has them; a pod admitted before the LimitRange gets
// them with its next resize, whatever the resize sets, and they are then
// what LimitRanger checks (from 1.38, a default added is a value the
// resize changes). fit reads a pod as LimitRanger will check it
// (limitRangerView): a container's own limit may be one the resize will
// add.

// limitRangerView returns pod with the cpu and memory defaults of ranges
// set on its containers and init containers that lack them, as
// LimitRanger's mutation sets them. It is a copy; pod itself when nothing
// is added.
func limitRangerView(pod *corev1.Pod, ranges []*corev1.LimitRange) *corev1.Pod {
	var view *corev1.Pod
	for _, lr := range ranges {
		requests, limits := limitRangeDefaults(lr)
		if len(requests) == 0 && len(limits) == 0 {
			continue
		}
		for _, list := range [2]func(*corev1.Pod) []corev1.Container{
			func(p *corev1.Pod) []corev1.Container { return p.Spec.Containers },
			func(p *corev1.Pod) []corev1.Container { return p.Spec.InitContainers },
		} {
			for i := range list(pod) {
				c := &list(pod)[i]
				if view != nil {
					c = &list(view)[i]
				}
				if !lacks(c.Resources.Requests, requests) && !lacks(c.Resources.Limits, limits) {
					continue
				}
				if view == nil {
					view = pod.DeepCopy()
					c = &list(view)[i]
				}
				c.Resources.Requests = withDefaults(c.Resources.Requests, requests)
				c.Resources.Limits = withDefaults(c.Resources.Limits, limits)
			}
		}
	}
	if view == nil {
		return pod
	}
	return view
}

// limitRangeDefaults returns the cpu and memory default requests and
// limits of lr's container items, as the API server stores them (see
// above); a later item's replaces an earlier one's, as in LimitRanger.
func limitRangeDefaults(lr *corev1.LimitRange) (requests, limits corev1.ResourceList) {
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for _, r := range fitResources {
			lim, hasLim := item.Default[r]
			if !hasLim {
				lim, hasLim = item.Max[r]
			}
			req, hasReq := item.DefaultRequest[r]
			if !hasReq {
				req, hasReq = lim, hasLim
			}
			if !hasReq {
				req, hasReq = item.Min[r]
			}
			if hasLim {
				if limits == nil {
					limits = corev1.ResourceList{}
				}
				limits[r] = lim
			}
			if hasReq {
				if requests == nil {
					requests = corev1.ResourceList{}
				}
				requests[r] = req
			}
		}
	}
	return requests, limits
}

// lacks tells whether list lacks an entry of defaults.
func lacks(list, defaults corev1.ResourceList) bool {
	for r := range defaults {
		if _, ok := list[r]; !ok {
			return true
		}
	}
	return false
}

// withDefaults returns a copy of list with the entries of defaults it
// lacks; list itself when it lacks none.
func withDefaults(list, defaults corev1.ResourceList) corev1.ResourceList {
	if !lacks(list, defaults) {
		return list
	}
	out := make(corev1.ResourceList, len(list)+len(defaults))
	for r, q := range list {
		out[r] = q
	}
	for r, q := range defaults {
		if _, ok := out[r]; !ok {
			out[r] = q.DeepCopy()
		}
	}
	return out
}
