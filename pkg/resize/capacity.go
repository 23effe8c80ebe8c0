package resize

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// ReasonWaitingForNodeCapacity: the resize does not fit the node now and
// the VPA asks to send only what fits (resize-when: fits-node): it is not
// sent, so that the pod never shows PodResizePending.
const ReasonWaitingForNodeCapacity Reason = "WaitingForNodeCapacity"

// FitsNode tells whether pod, resized to target, fits its node now: the
// node's allocatable cpu and memory, less what the other pods bound to it
// hold, must cover what the pod would then request. Pods count as the
// kubelet counts them: init containers, sidecars, overhead and pod-level
// resources included, each at the larger of its spec and what the kubelet
// allocated (a resize of theirs under way holds the larger); pods that have
// terminated hold nothing, terminating ones still do. held are the requests
// of resizes sent to pods of the node that others may not show yet, by pod
// UID (ResizedRequests): such a pod counts at the larger of both, and one
// others lacks at what it holds. others and held may include pod itself
// (it is skipped). The answer says, when it does not fit, what is short.
func FitsNode(node *corev1.Node, others []*corev1.Pod, held map[types.UID]corev1.ResourceList, pod *corev1.Pod, target resources.Resources) (bool, string) {
	used := corev1.ResourceList{}
	seen := make(map[types.UID]bool, len(others))
	for _, p := range others {
		if p.UID == pod.UID || p.Spec.NodeName != node.Name {
			continue
		}
		seen[p.UID] = true
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		requests := HeldRequests(p)
		if h, ok := held[p.UID]; ok {
			requests = Larger(requests, h)
		}
		addTo(used, requests)
	}
	for uid, h := range held {
		if uid != pod.UID && !seen[uid] {
			addTo(used, h)
		}
	}
	need := ResizedRequests(pod, target)
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		alloc, ok := node.Status.Allocatable[name]
		if !ok {
			continue
		}
		free := alloc.DeepCopy()
		if u, ok := used[name]; ok {
			free.Sub(u)
		}
		want := need[name]
		if want.Cmp(free) > 0 {
			free = nonNegative(free)
			return false, fmt.Sprintf("node %s has %s %s free of %s allocatable; the pod would request %s",
				node.Name, free.String(), name, alloc.String(), want.String())
		}
	}
	return true, ""
}

// ResizedRequests is what pod requests of its node once resized to target:
// its spec with target's requests, counted as FitsNode counts pods.
func ResizedRequests(pod *corev1.Pod, target resources.Resources) corev1.ResourceList {
	return resourcehelper.PodRequests(withRequests(pod, target), resourcehelper.PodResourcesOptions{})
}

// HeldRequests is what pod holds of its node as FitsNode counts it: its
// requests, pod-level ones included, at the larger of its spec and what its
// status shows (allocated, actual), as the scheduler and the kubelet count
// them; the status is empty where the kubelet does not resize them.
func HeldRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true})
}

// Larger returns, for each resource of a or b, the larger quantity.
func Larger(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(a)+len(b))
	for name, q := range a {
		out[name] = q
	}
	for name, q := range b {
		if v, ok := out[name]; !ok || q.Cmp(v) > 0 {
			out[name] = q
		}
	}
	return out
}

// withRequests returns a pod whose containers and sidecars request what
// target says, for PodRequests: it holds only the parts of pod's spec that
// PodRequests reads (containers, init containers, pod-level resources,
// overhead). pod is not changed: the lists are copied, and a container's
// requests are copied before target's are written into them; what is only
// read (limits, the other fields of a container) is shared.
func withRequests(pod *corev1.Pod, target resources.Resources) *corev1.Pod {
	out := &corev1.Pod{Spec: corev1.PodSpec{
		Containers:     slices.Clone(pod.Spec.Containers),
		InitContainers: slices.Clone(pod.Spec.InitContainers),
		Overhead:       pod.Spec.Overhead,
	}}
	if pod.Spec.Resources != nil {
		r := *pod.Spec.Resources
		r.Requests = maps.Clone(r.Requests)
		out.Spec.Resources = &r
	}
	for ref := range recommendation.Containers(out) {
		c := ref.Container
		t, ok := target[c.Name]
		if !ok || len(t.Requests) == 0 {
			continue
		}
		requests := make(corev1.ResourceList, len(c.Resources.Requests)+len(t.Requests))
		maps.Copy(requests, c.Resources.Requests)
		maps.Copy(requests, t.Requests)
		c.Resources.Requests = requests
	}
	setPodLevelRequests(out, target)
	return out
}

func addTo(sum, l corev1.ResourceList) {
	for name, q := range l {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
}

func nonNegative(q resource.Quantity) resource.Quantity {
	if q.Sign() < 0 {
		return resource.Quantity{}
	}
	return q
}

// WaitForNode turns a decision to patch into one to wait until the node has
// room: nothing is sent. why says what is short (FitsNode's answer).
func WaitForNode(d Decision, why string) Decision {
	if d.Action != ActionPatch {
		return d
	}
	d.Patch = nil
	return d.with(ActionWait, ReasonWaitingForNodeCapacity, "the resize to "+d.Target.String()+" does not fit the node now: "+why)
}
