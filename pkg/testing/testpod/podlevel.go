package testpod

import (
	corev1 "k8s.io/api/core/v1"
)

// PodLevel sets the pod-level requests and limits (spec.resources); any of
// the values may be empty to leave it unset. Call it before Running, which
// then reports them as the kubelet does.
func (b *Builder) PodLevel(reqCPU, reqMemory, limCPU, limMemory string) *Builder {
	b.pod.Spec.Resources = &corev1.ResourceRequirements{Requests: List(reqCPU, reqMemory), Limits: List(limCPU, limMemory)}
	return b
}

// PodLevelStatus reports the pod-level values as a kubelet with
// InPlacePodLevelResourcesVerticalScaling does (Kubernetes 1.35 with the
// alpha gate, 1.36+): status.allocatedResources (the pod-level requests)
// and status.resources (what the pod cgroup has), equal to the spec, and
// the pod's QoS class from its pod-level values.
func (b *Builder) PodLevelStatus() *Builder {
	p := b.pod.Spec.Resources
	if p == nil {
		return b
	}
	b.pod.Status.AllocatedResources = p.Requests.DeepCopy()
	b.pod.Status.Resources = p.DeepCopy()
	return b.podLevelQOS()
}

// RunningPodLevel reports the pod-level limits the pod cgroup has (status
// resources), cpu and memory either empty for the spec's.
func (b *Builder) RunningPodLevel(limCPU, limMemory string) *Builder {
	if b.pod.Status.Resources == nil {
		b.PodLevelStatus()
	}
	for name, q := range List(limCPU, limMemory) {
		b.pod.Status.Resources.Limits[name] = q
	}
	return b
}

// podLevelQOS sets the QoS class from the pod-level values, as the API
// server computes it when they are set.
func (b *Builder) podLevelQOS() *Builder {
	p := b.pod.Spec.Resources
	class := corev1.PodQOSClass("")
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := p.Requests[r], p.Limits[r]
		this := corev1.PodQOSGuaranteed
		switch {
		case req.Cmp(lim) != 0:
			this = corev1.PodQOSBurstable
		case req.IsZero():
			this = corev1.PodQOSBestEffort
		}
		switch {
		case class == "":
			class = this
		case class != this:
			class = corev1.PodQOSBurstable
		}
	}
	b.pod.Status.QOSClass = class
	return b
}
