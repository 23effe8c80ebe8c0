package admission

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decodePodFast is decodePod of a plain pod in one pass (see jsonread.go);
// ok false leaves the answer to the reference path. It builds the pod
// directly: the same pod and shape the reference path builds.
func decodePodFast(raw []byte, namespace string) (pod *corev1.Pod, shape *podShape, ok bool) {
	if len(raw) == 0 {
		return nil, nil, false
	}
	r := newJSONReader(raw)
	defer r.release()
	if !r.open('{') {
		return nil, nil, false
	}
	pod, shape = &corev1.Pod{}, &podShape{}
	var apiVersion, kind, metaNamespace string
	var seen names
	for {
		more, ok := r.more()
		if !ok {
			return nil, nil, false
		}
		if !more {
			break
		}
		name, ok := r.name()
		if !ok {
			return nil, nil, false
		}
		switch string(name) {
		case "apiVersion":
			ok = seen.once(0) && r.str(&apiVersion)
		case "kind":
			ok = seen.once(1) && r.str(&kind)
		case "metadata":
			ok = seen.once(2) && readPodMeta(r, pod, shape, &metaNamespace)
		case "spec":
			ok = seen.once(3) && readPodSpec(r, pod, shape)
		default:
			ok = r.skip()
		}
		if !ok {
			return nil, nil, false
		}
	}
	if !r.end() || ((apiVersion != "" || kind != "") && (apiVersion != "v1" || kind != "Pod")) {
		return nil, nil, false
	}
	pod.Namespace = namespace
	if pod.Namespace == "" {
		pod.Namespace = metaNamespace
	}
	return pod, shape, true
}

func readPodMeta(r *jsonReader, pod *corev1.Pod, shape *podShape, namespace *string) bool {
	isNull, ok := r.objectOrNull()
	if !ok || isNull {
		return ok
	}
	shape.metadata = true
	var labels, owners []byte
	var seen names
	for {
		more, ok := r.more()
		if !ok {
			return false
		}
		if !more {
			break
		}
		name, ok := r.name()
		if !ok {
			return false
		}
		switch string(name) {
		case "name":
			ok = seen.once(0) && r.str(&pod.Name)
		case "generateName":
			ok = seen.once(1) && r.str(&pod.GenerateName)
		case "namespace":
			ok = seen.once(2) && r.str(namespace)
		case "labels":
			if ok = seen.once(3); ok {
				labels, ok = readRaw(r)
			}
		case "ownerReferences":
			if ok = seen.once(4); ok {
				owners, ok = readRaw(r)
			}
		case "annotations":
			var v []byte
			if ok = seen.once(5); ok {
				v, ok = readRaw(r)
			}
			shape.annotations, shape.annotationsJSON = v != nil, v
		default:
			ok = r.skip()
		}
		if !ok {
			return false
		}
	}
	// Bounded before they are decoded, as on the reference path.
	if len(labels) > maxPodLabelsBytes || len(owners) > maxPodOwnerReferencesBytes {
		return false
	}
	if labels != nil && !readLabels(r.subReader(labels), &pod.Labels) {
		return false
	}
	return owners == nil || readOwnerReferences(r.subReader(owners), &pod.OwnerReferences)
}

func readLabels(r *jsonReader, labels *map[string]string) bool {
	if !r.open('{') {
		return false
	}
	m := map[string]string{}
	for {
		more, ok := r.more()
		if !ok {
			return false
		}
		if !more {
			break
		}
		name, ok := r.name()
		if !ok || r.kind() != '"' {
			return false
		}
		if _, dup := m[string(name)]; dup {
			return false
		}
		var value string
		if !r.str(&value) {
			return false
		}
		m[string(name)] = value
	}
	*labels = m
	return r.end()
}

func readOwnerReferences(r *jsonReader, refs *[]metav1.OwnerReference) bool {
	if !r.open('[') {
		return false
	}
	out := []metav1.OwnerReference{}
	for {
		more, ok := r.more()
		if !ok {
			return false
		}
		if !more {
			break
		}
		if !r.open('{') {
			return false
		}
		var ref metav1.OwnerReference
		var seen names
		for {
			more, ok := r.more()
			if !ok {
				return false
			}
			if !more {
				break
			}
			name, ok := r.name()
			if !ok {
				return false
			}
			switch string(name) {
			case "apiVersion":
				ok = seen.once(0) && r.str(&ref.APIVersion)
			case "kind":
				ok = seen.once(1) && r.str(&ref.Kind)
			case "name":
				ok = seen.once(2) && r.str(&ref.Name)
			case "uid":
				ok = seen.once(3) && r.str((*string)(&ref.UID))
			case "controller":
				ok = seen.once(4) && r.boolPtr(&ref.Controller)
			case "blockOwnerDeletion":
				ok = seen.once(5) && r.boolPtr(&ref.BlockOwnerDeletion)
			default:
				ok = r.skip()
			}
			if !ok {
				return false
			}
		}
		out = append(out, ref)
	}
	*refs = out
	return r.end()
}

func readPodSpec(r *jsonReader, pod *corev1.Pod, shape *podShape) bool {
	isNull, ok := r.objectOrNull()
	if !ok || isNull {
		return ok
	}
	shape.spec = true
	var seen names
	for {
		more, ok := r.more()
		if !ok || !more {
			return ok
		}
		name, ok := r.name()
		if !ok {
			return false
		}
		switch string(name) {
		case "containers":
			ok = seen.once(0) && readContainers(r, &pod.Spec.Containers, &shape.containers)
		case "initContainers":
			ok = seen.once(1) && readContainers(r, &pod.Spec.InitContainers, &shape.initContainers)
		case "resources":
			// Pod-level resources.
			var res corev1.ResourceRequirements
			ok = seen.once(2) && readResources(r, &res, &shape.podLevel)
			if shape.podLevel.resources {
				pod.Spec.Resources = &res
			}
		default:
			ok = r.skip()
		}
		if !ok {
			return false
		}
	}
}

// readContainers reads a list of containers, and their shapes.
func readContainers(r *jsonReader, containers *[]corev1.Container, shapes *[]containerShape) bool {
	isNull, ok := r.arrayOrNull()
	if !ok || isNull {
		return ok
	}
	out := []corev1.Container{}
	var outShapes []containerShape
	for {
		more, ok := r.more()
		if !ok {
			return false
		}
		if !more {
			break
		}
		var c corev1.Container
		var s containerShape
		if !readContainer(r, &c, &s) {
			return false
		}
		out = append(out, c)
		outShapes = append(outShapes, s)
	}
	*containers = out
	*shapes = outShapes
	return true
}

func readContainer(r *jsonReader, c *corev1.Container, shape *containerShape) bool {
	if !r.open('{') { // a null container is left to the reference path
		return false
	}
	var seen names
	for {
		more, ok := r.more()
		if !ok || !more {
			return ok
		}
		name, ok := r.name()
		if !ok {
			return false
		}
		switch string(name) {
		case "name":
			ok = seen.once(0) && r.str(&c.Name)
		case "resources":
			ok = seen.once(1) && readResources(r, &c.Resources, shape)
		case "resizePolicy":
			ok = seen.once(2) && readResizePolicy(r, &c.ResizePolicy)
		case "restartPolicy":
			switch k := r.kind(); {
			case !seen.once(3):
				ok = false
			case k == 'n':
				ok = r.skip()
			case k == '"':
				var p string
				ok = r.str(&p)
				policy := corev1.ContainerRestartPolicy(p)
				c.RestartPolicy = &policy
			default:
				ok = false
			}
		case "command":
			ok = seen.once(4) && readRawInto(r, &shape.spec.command)
		case "args":
			ok = seen.once(5) && readRawInto(r, &shape.spec.args)
		case "env":
			ok = seen.once(6) && readRawInto(r, &shape.spec.env)
		case "envFrom":
			ok = seen.once(7) && readRawInto(r, &shape.spec.envFrom)
		default:
			ok = r.skip()
		}
		if !ok {
			return false
		}
	}
}

// readRawInto reads a value as it is in the input (nil for null) into v.
func readRawInto(r *jsonReader, v *rawValue) bool {
	b, ok := readRaw(r)
	*v = b
	return ok
}

func readResources(r *jsonReader, res *corev1.ResourceRequirements, shape *containerShape) bool {
	isNull, ok := r.objectOrNull()
	if !ok || isNull {
		return ok
	}
	shape.resources = true
	var seen names
	for {
		more, ok := r.more()
		if !ok || !more {
			return ok
		}
		name, ok := r.name()
		if !ok {
			return false
		}
		switch string(name) {
		case "requests":
			ok = seen.once(0) && readResourceList(r, &res.Requests, &shape.requests)
		case "limits":
			ok = seen.once(1) && readResourceList(r, &res.Limits, &shape.limits)
		default:
			ok = r.skip()
		}
		if !ok {
			return false
		}
	}
}

// readResourceList reads a requests or limits map, each quantity checked
// against pkg/quantity's bound before it is parsed (boundedQuantity), or a
// null.
func readResourceList(r *jsonReader, list *corev1.ResourceList, present *bool) bool {
	isNull, ok := r.objectOrNull()
	if !ok || isNull {
		return ok
	}
	*present = true
	out := corev1.ResourceList{}
	for {
		more, ok := r.more()
		if !ok {
			return false
		}
		if !more {
			break
		}
		name, ok := r.name()
		if !ok {
			return false
		}
		if _, dup := out[corev1.ResourceName(name)]; dup {
			return false
		}
		v, ok := r.value()
		var q boundedQuantity
		if !ok || q.UnmarshalJSON(v) != nil {
			return false
		}
		out[corev1.ResourceName(intern(name))] = q.q
	}
	*list = out
	return true
}

func readResizePolicy(r *jsonReader, policies *[]corev1.ContainerResizePolicy) bool {
	isNull, ok := r.arrayOrNull()
	if !ok || isNull {
		return ok
	}
	out := []corev1.ContainerResizePolicy{}
	for {
		more, ok := r.more()
		if !ok {
			return false
		}
		if !more {
			break
		}
		if !r.open('{') {
			return false
		}
		var p corev1.ContainerResizePolicy
		var seen names
		for {
			more, ok := r.more()
			if !ok {
				return false
			}
			if !more {
				break
			}
			name, ok := r.name()
			if !ok {
				return false
			}
			switch string(name) {
			case "resourceName":
				ok = seen.once(0) && r.str((*string)(&p.ResourceName))
			case "restartPolicy":
				ok = seen.once(1) && r.str((*string)(&p.RestartPolicy))
			default:
				ok = r.skip()
			}
			if !ok {
				return false
			}
		}
		out = append(out, p)
	}
	*policies = out
	return true
}
