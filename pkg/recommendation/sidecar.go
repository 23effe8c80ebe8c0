package recommendation

import (
	"iter"
	"slices"

	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// Native sidecars (KEP-753) are init containers with restartPolicy Always:
// they run beside the app containers for the pod's whole life, and can be
// resized in place since Kubernetes 1.33. A recommendation names them as it
// names app containers, by container name (AEP-8905: the VPA object does
// not change; names are unique across a pod's containers and init
// containers). Init containers that are not sidecars run before the app
// containers and are done when they start: a recommendation naming one is
// ignored (IgnoredInitContainers says which).
//
// Upstream VPA 1.8's recommendation processing (capping, LimitRange
// proportions, proportional limits) reads spec.containers and
// containerStatuses only, and drops a recommendation whose container it
// does not find there. ForPod therefore hands it the pod with its sidecars
// listed among the containers (withSidecars); everything downstream finds
// a container through Containers.

// Ref is one container a recommendation may set: an app container, or a
// sidecar.
type Ref struct {
	Container *corev1.Container
	// Sidecar tells that Container is in spec.initContainers (and its
	// status in status.initContainerStatuses).
	Sidecar bool
	// Index is the container's index in its list: spec.containers, or
	// spec.initContainers for a sidecar.
	Index int
}

// IsSidecar reports whether an init container is a sidecar
// (restartPolicy Always). An app container may carry a restartPolicy too
// (container restart rules): only init containers are asked.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// HasSidecars reports whether pod has a sidecar.
func HasSidecars(pod *corev1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// Containers yields the containers of pod that a recommendation may set:
// its app containers, then its sidecars, each in its list's order. A
// sidecar whose name an app container or an earlier init container already
// has is left out: a recommendation names one container, and such a pod
// is invalid anyway (the admission webhook sees pods before the API
// server validates them).
func Containers(pod *corev1.Pod) iter.Seq[Ref] {
	return func(yield func(Ref) bool) {
		for i := range pod.Spec.Containers {
			if !yield(Ref{Container: &pod.Spec.Containers[i], Index: i}) {
				return
			}
		}
		if !HasSidecars(pod) {
			return
		}
		taken := make(map[string]bool, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
		for i := range pod.Spec.Containers {
			taken[pod.Spec.Containers[i].Name] = true
		}
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			dup := taken[c.Name]
			taken[c.Name] = true
			if dup || !IsSidecar(c) {
				continue
			}
			if !yield(Ref{Container: c, Sidecar: true, Index: i}) {
				return
			}
		}
	}
}

// Find returns the container of pod named name that a recommendation may
// set, and false when there is none.
func Find(pod *corev1.Pod, name string) (Ref, bool) {
	for r := range Containers(pod) {
		if r.Container.Name == name {
			return r, true
		}
	}
	return Ref{}, false
}

// Status returns what the kubelet reports of r: its entry of
// status.containerStatuses, or of status.initContainerStatuses for a
// sidecar; nil when there is none.
func Status(pod *corev1.Pod, r Ref) *corev1.ContainerStatus {
	list := pod.Status.ContainerStatuses
	if r.Sidecar {
		list = pod.Status.InitContainerStatuses
	}
	for i := range list {
		if list[i].Name == r.Container.Name {
			return &list[i]
		}
	}
	return nil
}

// withSidecars returns pod as upstream's processing must read it: its
// sidecars appended to spec.containers and their statuses to
// status.containerStatuses, the other init containers left where they are.
// It is a shallow copy sharing the containers' fields; pod itself when it
// has no sidecar.
func withSidecars(pod *corev1.Pod) *corev1.Pod {
	if !HasSidecars(pod) {
		return pod
	}
	view := *pod
	view.Spec.Containers = nil
	view.Spec.InitContainers = nil
	view.Status.ContainerStatuses = nil
	for r := range Containers(pod) {
		view.Spec.Containers = append(view.Spec.Containers, *r.Container)
		if st := Status(pod, r); st != nil {
			view.Status.ContainerStatuses = append(view.Status.ContainerStatuses, *st)
		}
	}
	for i := range pod.Spec.InitContainers {
		if !IsSidecar(&pod.Spec.InitContainers[i]) {
			view.Spec.InitContainers = append(view.Spec.InitContainers, pod.Spec.InitContainers[i])
		}
	}
	return &view
}

// MaxIgnoredNames bounds the names IgnoredInitContainers returns.
const MaxIgnoredNames = 8

// IgnoredInitContainers returns the names of pod's init containers that
// are not sidecars and that vpa's recommendation names, sorted and at most
// MaxIgnoredNames of them, and how many there are in all. Such a
// recommendation is ignored: the container has finished before the app
// containers start, and its resources are immutable (until 1.36) or only
// worth changing while it runs. The recommendation is read once, whatever
// its length; nothing is read when the pod has no such init container.
func IgnoredInitContainers(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (names []string, total int) {
	if pod == nil || vpa == nil || vpa.Status.Recommendation == nil || len(pod.Spec.InitContainers) == 0 {
		return nil, 0
	}
	plain := map[string]bool{}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; !IsSidecar(c) {
			plain[c.Name] = true
		}
	}
	if len(plain) == 0 {
		return nil, 0
	}
	for r := range Containers(pod) {
		delete(plain, r.Container.Name) // an app container of that name takes it
	}
	for _, rec := range vpa.Status.Recommendation.ContainerRecommendations {
		if !plain[rec.ContainerName] {
			continue
		}
		delete(plain, rec.ContainerName) // counted once, however often named
		total++
		if len(names) < MaxIgnoredNames {
			names = append(names, rec.ContainerName)
		}
	}
	slices.Sort(names)
	return names, total
}
