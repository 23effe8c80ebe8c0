package resize

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// mirrorPodAnnotation marks static pods; they cannot be resized.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Validate tells, before any patch is sent, whether resizing pod to target
// in place is known to be impossible. It returns "" when the change looks
// possible. It mirrors the API server's resize validation for Kubernetes
// 1.33 to 1.38 (serverMinor 0 means unknown: version-specific rules are then
// left to the API server) and the in-place validity checks that operators
// such as Strimzi apply (no removal of requests or limits).
func Validate(pod *corev1.Pod, target resources.Resources, serverMinor int) string {
	if _, ok := pod.Annotations[mirrorPodAnnotation]; ok {
		return "static pods cannot be resized"
	}
	if pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows {
		return "windows pods cannot be resized"
	}
	if msg := podLevelVersionRule(pod, serverMinor); msg != "" {
		return msg
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.State.Running != nil && st.Resources == nil {
			return "the pod runs on a node without support for in-place resize (no container resources reported)"
		}
	}

	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		t, ok := target[c.Name]
		if !ok {
			continue
		}
		if msg := validateSidecar(ref, serverMinor); msg != "" {
			return msg
		}
		for _, list := range []struct {
			what      string
			now, want corev1.ResourceList
		}{{"requests", c.Resources.Requests, t.Requests}, {"limits", c.Resources.Limits, t.Limits}} {
			for name := range list.now {
				if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
					continue
				}
				if _, kept := list.want[name]; !kept {
					return fmt.Sprintf("%s: %s %s cannot be removed in place", label(ref), name, list.what)
				}
			}
		}
		for name, req := range t.Requests {
			if lim, ok := t.Limits[name]; ok && req.Cmp(lim) > 0 {
				return fmt.Sprintf("%s: %s request %s would exceed its limit %s", label(ref), name, req.String(), lim.String())
			}
		}
		if serverMinor == 33 && policyFor(c, corev1.ResourceMemory) != corev1.RestartContainer {
			oldLim, hadLim := c.Resources.Limits[corev1.ResourceMemory]
			newLim, hasLim := t.Limits[corev1.ResourceMemory]
			switch {
			case !hadLim && hasLim:
				return fmt.Sprintf("%s: Kubernetes 1.33 forbids adding a memory limit in place unless its memory resizePolicy is RestartContainer", label(ref))
			case hadLim && hasLim && newLim.Cmp(oldLim) < 0:
				return fmt.Sprintf("%s: Kubernetes 1.33 forbids decreasing a memory limit in place unless its memory resizePolicy is RestartContainer", label(ref))
			}
		}
	}

	if msg := validatePodLevel(pod, target); msg != "" {
		return msg
	}
	before := qosClass(pod, nil)
	if after := qosClass(pod, target); after != before {
		return fmt.Sprintf("the pod's QoS class would change from %s to %s, which resizing cannot do", before, after)
	}
	return ""
}

// policyFor returns a container's resize restart policy for a resource;
// unset means NotRequired.
func policyFor(c *corev1.Container, name corev1.ResourceName) corev1.ResourceResizeRestartPolicy {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy
		}
	}
	return corev1.NotRequired
}

// qosClass computes the QoS class the pod would have with target applied to
// its containers (nil target: as it is), from container requests and limits,
// as the API server does for pods without pod-level resources. Init
// containers count too.
func qosClass(pod *corev1.Pod, target resources.Resources) corev1.PodQOSClass {
	if pod.Spec.Resources != nil {
		// Pod-level resources decide the class; container changes within
		// them cannot move it. Trust the reported class.
		return pod.Status.QOSClass
	}
	isGuaranteed, hasAny := true, false
	visit := func(r corev1.ResourceRequirements) {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := r.Requests[name]
			lim, hasLim := r.Limits[name]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				hasAny = true
			}
			// A missing request defaults to the limit.
			if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
				isGuaranteed = false
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		r := c.Resources
		if t, ok := target[c.Name]; ok && recommendation.IsSidecar(&c) {
			// Target holds no init container that is not a sidecar.
			r = t
		}
		visit(r)
	}
	for _, c := range pod.Spec.Containers {
		r := c.Resources
		if t, ok := target[c.Name]; ok {
			r = t
		}
		visit(r)
	}
	switch {
	case !hasAny:
		return corev1.PodQOSBestEffort
	case isGuaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}
