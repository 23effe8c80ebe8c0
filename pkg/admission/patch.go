package admission

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"

	vpapatch "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/pod/patch"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
)

// ResourceUpdatesAnnotation is the pod annotation that records which
// resources were set at admission, in upstream VPA's key and format:
// "Pod resources updated by <vpa>: container 0: cpu request, memory request".
// It is informational; nothing reads it back.
const ResourceUpdatesAnnotation = vpapatch.ResourceUpdatesAnnotation

// PatchOperation is one JSON Patch (RFC 6902) operation.
type PatchOperation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// PodPatch returns the JSON Patch that gives the containers of pod the
// requests and limits in desired, and records them in
// ResourceUpdatesAnnotation. raw is the pod's JSON as received, pod its
// decoded form. Only values that differ from the pod's are set; other
// resources and fields are left alone. It returns no operations when nothing
// changes.
func PodPatch(raw []byte, pod *corev1.Pod, desired recommendation.Desired, vpaName string) ([]PatchOperation, error) {
	var shape podView
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &shape); err != nil {
		return nil, fmt.Errorf("reading the pod's shape: %w", err)
	}
	return podPatch(&shape, pod, desired, vpaName)
}

// podPatch is PodPatch of a pod already decoded: shape tells which maps of
// its JSON exist, pod holds its values.
func podPatch(shape *podView, pod *corev1.Pod, desired recommendation.Desired, vpaName string) ([]PatchOperation, error) {
	if shape.Spec == nil || len(shape.Spec.Containers) != len(pod.Spec.Containers) {
		return nil, fmt.Errorf("the pod's JSON has a different number of containers than the decoded pod")
	}
	if slices.Contains(shape.Spec.Containers, nil) {
		return nil, fmt.Errorf("the pod's JSON has a null container")
	}

	var ops []PatchOperation
	var updates []string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		want, ok := desired[c.Name]
		if !ok {
			continue
		}
		requests := changed(c.Resources.Requests, want.Requests)
		limits := changed(c.Resources.Limits, want.Limits)
		if len(requests) == 0 && len(limits) == 0 {
			continue
		}
		base := fmt.Sprintf("/spec/containers/%d/resources", i)
		rawResources := shape.Spec.Containers[i].Resources
		if rawResources == nil {
			value := map[string]map[string]string{}
			if len(requests) > 0 {
				value["requests"] = asStrings(requests, want.Requests)
			}
			if len(limits) > 0 {
				value["limits"] = asStrings(limits, want.Limits)
			}
			ops = append(ops, PatchOperation{Op: "add", Path: base, Value: value})
		} else {
			ops = append(ops, listOps(base+"/requests", rawResources.Requests.present(), requests, want.Requests)...)
			ops = append(ops, listOps(base+"/limits", rawResources.Limits.present(), limits, want.Limits)...)
		}
		var what []string
		for _, n := range requests {
			what = append(what, string(n)+" request")
		}
		for _, n := range limits {
			what = append(what, string(n)+" limit")
		}
		updates = append(updates, fmt.Sprintf("container %d: %s", i, strings.Join(what, ", ")))
	}
	if len(ops) == 0 {
		return nil, nil
	}

	note := fmt.Sprintf("Pod resources updated by %s: %s", vpaName, strings.Join(updates, "; "))
	switch {
	case shape.Metadata == nil:
		ops = append(ops, PatchOperation{Op: "add", Path: "/metadata", Value: map[string]map[string]string{
			"annotations": {ResourceUpdatesAnnotation: note},
		}})
	case !shape.Metadata.Annotations.present():
		ops = append(ops, PatchOperation{Op: "add", Path: "/metadata/annotations", Value: map[string]string{ResourceUpdatesAnnotation: note}})
	default:
		ops = append(ops, PatchOperation{Op: "add", Path: "/metadata/annotations/" + escapePointer(ResourceUpdatesAnnotation), Value: note})
	}
	return ops, nil
}

// changed returns, sorted, the names whose value in want is missing from or
// different in have.
func changed(have, want corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for name, q := range want {
		if cur, ok := have[name]; ok && cur.Cmp(q) == 0 {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// listOps sets names of a requests or limits map at path: one operation per
// name when the map exists, one for the whole map otherwise. ("add" of an
// existing key replaces its value.)
func listOps(path string, exists bool, names []corev1.ResourceName, values corev1.ResourceList) []PatchOperation {
	if len(names) == 0 {
		return nil
	}
	if !exists {
		return []PatchOperation{{Op: "add", Path: path, Value: asStrings(names, values)}}
	}
	ops := make([]PatchOperation, 0, len(names))
	for _, n := range names {
		q := values[n]
		ops = append(ops, PatchOperation{Op: "add", Path: path + "/" + escapePointer(string(n)), Value: quantityString(q)})
	}
	return ops
}

func asStrings(names []corev1.ResourceName, values corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[string(n)] = quantityString(values[n])
	}
	return out
}

func quantityString(q resource.Quantity) string { return q.String() }

// escapePointer escapes one JSON Pointer (RFC 6901) reference token.
func escapePointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}
