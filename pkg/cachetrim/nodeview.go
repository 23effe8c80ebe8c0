package cachetrim

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

var _ cache.TransformFunc = NodeView

// NodeView is the transform of the updater's cluster-wide view of the pods
// bound to nodes, which the resizes sent only when they fit read
// (resize-when: fits-node) when the updater serves one namespace
// (--vpa-object-namespace): every pod of a node takes room, a DaemonSet's
// or kube-system's as well. Of a pod it keeps what k8s.io/component-helpers'
// PodRequests reads, the pod's status resources included, as the kubelet
// and the scheduler count a pod whose resize is under way: its identity,
// generation and node; its priority and preemption policy, and its
// DisruptionTarget condition (resize preemption, pkg/updater/preemption); each container's and init container's name, requests
// and restart policy (a sidecar adds to the containers); the pod's overhead
// and pod-level requests (with their allocated and actual values); its
// phase, its PodResizePending condition (an Infeasible resize counts at what
// the pod has, not its spec) and each container's allocated and actual
// requests. Everything else goes: such a
// pod costs a few hundred bytes. Resource lists are interned as Transform
// interns them. Idempotent; tombstones are left as they are.
func NodeView(obj any) (any, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		return obj, nil
	case *corev1.Pod:
		return nodeView(o, intern), nil
	}
	return Transform(obj)
}

func nodeView(p *corev1.Pod, in func(corev1.ResourceList) corev1.ResourceList) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Generation: p.Generation, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			NodeName:         p.Spec.NodeName,
			Priority:         p.Spec.Priority,
			PreemptionPolicy: p.Spec.PreemptionPolicy,
			Overhead:         in(p.Spec.Overhead),
			InitContainers:   requestsOnly(p.Spec.InitContainers, in),
			Containers:       requestsOnly(p.Spec.Containers, in),
		},
		Status: corev1.PodStatus{
			Phase:                 p.Status.Phase,
			InitContainerStatuses: statusRequestsOnly(p.Status.InitContainerStatuses, in),
			ContainerStatuses:     statusRequestsOnly(p.Status.ContainerStatuses, in),
		},
	}
	if p.Spec.Resources != nil {
		out.Spec.Resources = &corev1.ResourceRequirements{Requests: in(p.Spec.Resources.Requests)}
	}
	// The pod-level status (KEP-5419): what the pod's requests are counted
	// at when the kubelet reports it, as PodRequests counts them.
	out.Status.AllocatedResources = in(p.Status.AllocatedResources)
	if p.Status.Resources != nil {
		out.Status.Resources = &corev1.ResourceRequirements{Requests: in(p.Status.Resources.Requests)}
	}
	for _, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodResizePending:
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
		case corev1.DisruptionTarget:
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason,
				LastTransitionTime: c.LastTransitionTime})
		}
	}
	return out
}

func requestsOnly(cs []corev1.Container, in func(corev1.ResourceList) corev1.ResourceList) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{Name: cs[i].Name, RestartPolicy: cs[i].RestartPolicy,
			Resources: corev1.ResourceRequirements{Requests: in(cs[i].Resources.Requests)}}
	}
	return out
}

func statusRequestsOnly(ss []corev1.ContainerStatus, in func(corev1.ResourceList) corev1.ResourceList) []corev1.ContainerStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i := range ss {
		out[i] = corev1.ContainerStatus{Name: ss[i].Name, AllocatedResources: in(ss[i].AllocatedResources)}
		if ss[i].Resources != nil {
			out[i].Resources = &corev1.ResourceRequirements{Requests: in(ss[i].Resources.Requests)}
		}
	}
	return slices.Clip(out)
}
