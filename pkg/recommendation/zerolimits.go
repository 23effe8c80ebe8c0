package recommendation

import (
	corev1 "k8s.io/api/core/v1"
)

// A kubelet whose container runtime reports no resources fills
// status.containerStatuses[].resources from its checkpoint, and there a
// limit the container lacks reads as 0 (ResourceList.Memory() of an absent
// entry) whenever the container has a limit of the other resource: on a
// 1.37 or 1.38 kubelet a container with a cpu limit and no memory limit is
// reported with limits.memory: 0. Upstream's processing reads the status
// before the spec and takes that 0 for a limit: for a container whose VPA
// controls only requests it caps the recommended request to it
// (capRecommendationToContainerLimit), down to a request of 0, which the
// API server accepts. So what it reads is the pod with such reported
// limits, of 0 where the spec sets none, left out (withoutReportedZeroLimits).

// A limit of 0 set in a container's spec is no limit to the kubelet (no
// cpu quota, no memory limit; from Kubernetes 1.38 the pod's sandbox is not
// limited by it either, and 1.37 already left such a pod's sandbox
// unlimited), but the API server refuses a request above a limit, a limit
// of 0 included, on create and on resize, in 1.38 too; and a limit cannot
// be removed in place. Such a container's request of that resource is 0
// and stays so: what the VPA recommends for it is left out
// (withoutZeroLimitResources), at admission and on a resize alike. Upstream
// would give it the recommended request when the VPA controls limits too
// (no proportional limit of a 0), which the API server refuses: the pod's
// creation, or the resize.

// withoutZeroLimitResources returns desired without the resources each
// container of pod (spec.containers: the view withSidecars made) sets a
// limit of 0 of. desired is changed.
func withoutZeroLimitResources(pod *corev1.Pod, desired Desired) Desired {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		want, ok := desired[c.Name]
		if !ok {
			continue
		}
		for _, r := range fitResources {
			if q, ok := c.Resources.Limits[r]; !ok || !q.IsZero() {
				continue
			}
			want.Requests = without(want.Requests, r)
			want.Limits = without(want.Limits, r)
			want.LowerBound = without(want.LowerBound, r)
			want.UpperBound = without(want.UpperBound, r)
		}
		if len(want.Requests) == 0 && len(want.Limits) == 0 {
			delete(desired, c.Name)
			continue
		}
		desired[c.Name] = want
	}
	return desired
}

// without returns a copy of list without r; list itself when it has none.
func without(list corev1.ResourceList, r corev1.ResourceName) corev1.ResourceList {
	if _, ok := list[r]; !ok {
		return list
	}
	out := make(corev1.ResourceList, len(list))
	for name, q := range list {
		if name != r {
			out[name] = q
		}
	}
	return out
}

// withoutReportedZeroLimits returns pod with the cpu and memory limits of 0
// its containers' statuses report for limits their spec does not set left
// out. It is a shallow copy sharing what it does not change; pod itself
// when there is no such limit. It reads spec.containers and their statuses:
// the view withSidecars made.
func withoutReportedZeroLimits(pod *corev1.Pod) *corev1.Pod {
	var view *corev1.Pod
	for i := range pod.Status.ContainerStatuses {
		st := &pod.Status.ContainerStatuses[i]
		if st.Resources == nil {
			continue
		}
		spec := specLimits(pod, st.Name)
		drop := func(name corev1.ResourceName) bool {
			q, ok := st.Resources.Limits[name]
			_, set := spec[name]
			return ok && q.IsZero() && !set
		}
		if !drop(corev1.ResourceCPU) && !drop(corev1.ResourceMemory) {
			continue
		}
		if view == nil {
			v := *pod
			v.Status.ContainerStatuses = append([]corev1.ContainerStatus(nil), pod.Status.ContainerStatuses...)
			view = &v
		}
		limits := make(corev1.ResourceList, len(st.Resources.Limits))
		for name, q := range st.Resources.Limits {
			if (name == corev1.ResourceCPU || name == corev1.ResourceMemory) && drop(name) {
				continue
			}
			limits[name] = q
		}
		view.Status.ContainerStatuses[i].Resources = &corev1.ResourceRequirements{
			Requests: st.Resources.Requests, Limits: limits, Claims: st.Resources.Claims}
	}
	if view == nil {
		return pod
	}
	return view
}

// specLimits returns the limits the spec of pod's container name sets.
func specLimits(pod *corev1.Pod, name string) corev1.ResourceList {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return pod.Spec.Containers[i].Resources.Limits
		}
	}
	return nil
}
