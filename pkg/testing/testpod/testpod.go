// Package testpod builds Pod objects for tests:
//
//	testpod.New("p").Container("c", "100m", "100Mi").Running().Obj()
package testpod

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Builder builds a Pod.
type Builder struct{ pod *corev1.Pod }

// New starts a pod in namespace "default" with generation 1, UID "uid-<name>".
func New(name string) *Builder {
	return &Builder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:       name,
			Namespace:  "default",
			UID:        types.UID("uid-" + name),
			Generation: 1,
			Labels:     map[string]string{"app": "web"},
		},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

// Namespace sets the namespace.
func (b *Builder) Namespace(ns string) *Builder { b.pod.Namespace = ns; return b }

// UID sets the UID.
func (b *Builder) UID(uid string) *Builder { b.pod.UID = types.UID(uid); return b }

// Labels replaces the labels.
func (b *Builder) Labels(l map[string]string) *Builder { b.pod.Labels = l; return b }

// Annotation sets one annotation.
func (b *Builder) Annotation(k, v string) *Builder {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	b.pod.Annotations[k] = v
	return b
}

// Generation sets metadata.generation.
func (b *Builder) Generation(g int64) *Builder { b.pod.Generation = g; return b }

// ObservedGeneration sets status.observedGeneration.
func (b *Builder) ObservedGeneration(g int64) *Builder { b.pod.Status.ObservedGeneration = g; return b }

// OwnedBy adds a controller ownerReference.
func (b *Builder) OwnedBy(apiVersion, kind, name string) *Builder {
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true),
	})
	return b
}

// Container adds a container whose requests are cpu and memory (either may
// be empty to leave it unset) and whose limits are unset.
func (b *Builder) Container(name, cpu, memory string) *Builder {
	b.pod.Spec.Containers = append(b.pod.Spec.Containers, corev1.Container{
		Name:      name,
		Resources: corev1.ResourceRequirements{Requests: List(cpu, memory)},
	})
	return b
}

// Sidecar adds a sidecar: an init container with restartPolicy Always,
// whose requests are cpu and memory (either may be empty).
func (b *Builder) Sidecar(name, cpu, memory string) *Builder {
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, corev1.Container{
		Name:          name,
		Resources:     corev1.ResourceRequirements{Requests: List(cpu, memory)},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
	})
	return b
}

// InitContainer adds an init container that is not a sidecar, whose
// requests are cpu and memory (either may be empty).
func (b *Builder) InitContainer(name, cpu, memory string) *Builder {
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, corev1.Container{
		Name:      name,
		Resources: corev1.ResourceRequirements{Requests: List(cpu, memory)},
	})
	return b
}

// Limits sets the limits of the named container.
func (b *Builder) Limits(container, cpu, memory string) *Builder {
	c := b.container(container)
	c.Resources.Limits = List(cpu, memory)
	return b
}

// ReportedLimits sets the limits the kubelet reports for the named
// container or sidecar (status resources; call it after Running), cpu and
// memory as List reads them.
func (b *Builder) ReportedLimits(container, cpu, memory string) *Builder {
	for _, list := range [][]corev1.ContainerStatus{b.pod.Status.ContainerStatuses, b.pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == container && list[i].Resources != nil {
				list[i].Resources.Limits = List(cpu, memory)
			}
		}
	}
	return b
}

// Guaranteed adds a container with requests == limits.
func (b *Builder) Guaranteed(name, cpu, memory string) *Builder {
	b.Container(name, cpu, memory)
	return b.Limits(name, cpu, memory)
}

// ResizePolicy sets the resize policy of a resource of the named container.
func (b *Builder) ResizePolicy(container string, res corev1.ResourceName, policy corev1.ResourceResizeRestartPolicy) *Builder {
	c := b.container(container)
	c.ResizePolicy = append(c.ResizePolicy, corev1.ContainerResizePolicy{ResourceName: res, RestartPolicy: policy})
	return b
}

// Running marks the pod Running and Ready, with container statuses that
// report the spec's resources as allocated and actuated (a settled pod), and
// status.observedGeneration equal to the generation. Sidecars run; other
// init containers have completed.
func (b *Builder) Running() *Builder {
	b.pod.Status.Phase = corev1.PodRunning
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	b.pod.Status.ObservedGeneration = b.pod.Generation
	b.pod.Status.ContainerStatuses = nil
	for _, c := range b.pod.Spec.Containers {
		b.pod.Status.ContainerStatuses = append(b.pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:               c.Name,
			Ready:              true,
			State:              corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			AllocatedResources: c.Resources.Requests.DeepCopy(),
			Resources:          c.Resources.DeepCopy(),
		})
	}
	b.pod.Status.InitContainerStatuses = nil
	for _, c := range b.pod.Spec.InitContainers {
		st := corev1.ContainerStatus{
			Name:               c.Name,
			Ready:              true,
			State:              corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			AllocatedResources: c.Resources.Requests.DeepCopy(),
			Resources:          c.Resources.DeepCopy(),
		}
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			st.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
		}
		b.pod.Status.InitContainerStatuses = append(b.pod.Status.InitContainerStatuses, st)
	}
	b.pod.Status.QOSClass = QOS(b.pod)
	if b.pod.Spec.Resources != nil {
		b.podLevelQOS()
	}
	return b
}

// Condition adds a pod condition with status True.
func (b *Builder) Condition(t corev1.PodConditionType, reason, message string) *Builder {
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
	})
	return b
}

// ConditionSince adds a pod condition with status True whose
// lastTransitionTime is since.
func (b *Builder) ConditionSince(t corev1.PodConditionType, reason, message string, since time.Time) *Builder {
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(since),
	})
	return b
}

// LegacyResizeStatus sets the deprecated status.resize field.
func (b *Builder) LegacyResizeStatus(s corev1.PodResizeStatus) *Builder {
	b.pod.Status.Resize = s //nolint:staticcheck // the deprecated field is what is being tested
	return b
}

// Obj returns the pod.
func (b *Builder) Obj() *corev1.Pod { return b.pod }

func (b *Builder) container(name string) *corev1.Container {
	for i := range b.pod.Spec.Containers {
		if b.pod.Spec.Containers[i].Name == name {
			return &b.pod.Spec.Containers[i]
		}
	}
	for i := range b.pod.Spec.InitContainers {
		if b.pod.Spec.InitContainers[i].Name == name {
			return &b.pod.Spec.InitContainers[i]
		}
	}
	panic("testpod: no container " + name)
}

// List returns a ResourceList of cpu and memory, leaving out empty values.
func List(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

// QOS computes the QoS class of a pod from its containers and init
// containers (no pod-level resources), the same way the API server does.
func QOS(pod *corev1.Pod) corev1.PodQOSClass {
	guaranteed, any := true, false
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				any = true
			}
			if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}
