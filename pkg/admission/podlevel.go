package admission

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// A new pod with pod-level resources (spec.resources) gets container values
// its pod-level values admit, or its creation is refused: the API server
// checks the containers' aggregate requests against the pod-level requests
// and each container's limit against the pod-level limit. The pod-level
// values follow the containers by the rule the updater follows in place
// (recommendation.PodLevelFor): a pod-level request moves by as much as the
// containers' aggregate request, a pod-level limit keeps its ratio to it.
// Containers that share a resource at pod level are not given it
// (recommendation.SharedAtPodLevel, applied by the recommendation itself).
// At creation the pod-level values may always be set, whatever the
// Kubernetes version.

// withPodLevel returns desired with the pod-level values that follow it,
// under resources.PodLevel, when the pod has pod-level resources and they
// change; desired as it is otherwise.
func withPodLevel(pod *corev1.Pod, desired recommendation.Desired) recommendation.Desired {
	if len(desired) == 0 || !recommendation.PodLevelSet(pod) {
		return desired
	}
	lvl := recommendation.PodLevelFor(pod, recommendation.Overlay(pod, recommendation.DesiredValues(desired)))
	if lvl == nil {
		return desired
	}
	var reqNames, limNames [maxNames]corev1.ResourceName
	if len(changed(reqNames[:0], pod.Spec.Resources.Requests, cpuMemoryOf(lvl.Requests)))+
		len(changed(limNames[:0], pod.Spec.Resources.Limits, cpuMemoryOf(lvl.Limits))) == 0 {
		return desired
	}
	out := make(recommendation.Desired, len(desired)+1)
	for name, c := range desired {
		out[name] = c
	}
	out[resources.PodLevel] = recommendation.Container{Requests: cpuMemoryOf(lvl.Requests), Limits: cpuMemoryOf(lvl.Limits)}
	return out
}

// cpuMemoryOf returns the cpu and memory of l.
func cpuMemoryOf(l corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := l[name]; ok {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

const podLevelPath = "/spec/resources"

// addPodLevel adds the operations that give the pod the pod-level values
// desired holds under resources.PodLevel (those that differ), and says so
// in the note.
func (b *patchBuilder) addPodLevel(shape *podShape, pod *corev1.Pod, desired recommendation.Desired, noteStart int) {
	want, ok := desired[resources.PodLevel]
	if !ok || pod.Spec.Resources == nil || !shape.podLevel.resources {
		return
	}
	var reqBuf, limBuf [maxNames]corev1.ResourceName
	requests := changed(reqBuf[:0], pod.Spec.Resources.Requests, want.Requests)
	limits := changed(limBuf[:0], pod.Spec.Resources.Limits, want.Limits)
	if len(requests) == 0 && len(limits) == 0 {
		return
	}
	b.addPodLevelList("requests", shape.podLevel.requests, requests, want.Requests)
	b.addPodLevelList("limits", shape.podLevel.limits, limits, want.Limits)
	if len(b.note) > noteStart {
		b.note = append(b.note, "; "...)
	}
	b.note = append(b.note, "pod: "...)
	for j, n := range requests {
		if j > 0 {
			b.note = append(b.note, ", "...)
		}
		b.note = append(append(b.note, n...), " request"...)
	}
	for j, n := range limits {
		if j > 0 || len(requests) > 0 {
			b.note = append(b.note, ", "...)
		}
		b.note = append(append(b.note, n...), " limit"...)
	}
}

// addPodLevelList sets names of the pod-level requests or limits (which)
// map: one operation per name when the map exists, one for the whole map
// otherwise. ("add" of an existing key replaces its value.)
func (b *patchBuilder) addPodLevelList(which string, exists bool, names []corev1.ResourceName, values corev1.ResourceList) {
	if len(names) == 0 {
		return
	}
	if !exists {
		path := podLevelPath + "/" + which
		if !b.toJSON {
			b.ops = append(b.ops, PatchOperation{Op: "add", Path: path, Value: asStrings(names, values)})
			return
		}
		b.openOpPath([]byte(path))
		b.buf = append(b.buf, `,"value":`...)
		b.buf = append(appendList(b.buf, names, values), '}')
		return
	}
	for _, n := range names {
		q := values[n]
		if !b.toJSON {
			b.ops = append(b.ops, PatchOperation{Op: "add", Path: podLevelPath + "/" + which + "/" + escapePointer(string(n)), Value: q.String()})
			continue
		}
		b.path = appendPointerToken(append(b.path[:0], podLevelPath+"/"+which+"/"...), string(n))
		b.openOpPath(b.path)
		b.buf = append(b.buf, `,"value":`...)
		b.buf = appendJSONString(b.buf, q.String())
		b.buf = append(b.buf, '}')
	}
}

// podLevelShape is the shape of the pod-level resources (spec.resources).
func (v *podView) podLevelShape() containerShape {
	if v.Spec == nil || v.Spec.Resources == nil {
		return containerShape{}
	}
	r := v.Spec.Resources
	return containerShape{resources: true, requests: r.Requests.present(), limits: r.Limits.present()}
}
