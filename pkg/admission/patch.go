package admission

import (
	"fmt"
	"slices"
	"strconv"
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
	var view podView
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &view); err != nil {
		return nil, fmt.Errorf("reading the pod's shape: %w", err)
	}
	b := &patchBuilder{}
	if err := b.build(view.shape(), pod, desired, vpaName, nil); err != nil {
		return nil, err
	}
	return b.ops, nil
}

// patchBuilder works out a pod's patch (build), and holds it either as
// PatchOperation values (ops, for PodPatch) or, when toJSON is set, as the
// JSON that encoding/json writes of those values (buf, for the handler,
// without building them). TestPatchJSONIsEncodingJSONOfTheOperations checks
// that the two agree.
type patchBuilder struct {
	toJSON bool
	ops    []PatchOperation
	buf    []byte // the JSON array, unterminated until finish
	n      int    // operations written to buf
	// note is the text of ResourceUpdatesAnnotation being built.
	note []byte
	// path is room for a path before it is escaped into buf.
	path []byte
}

// maxNames is the number of resource names a container's change holds
// without allocating: cpu and memory, and room for a few more.
const maxNames = 4

// build works out the patch of pod, whose JSON has shape. Nothing is added
// when nothing changes. desired's resources.PodLevel entry, if any, is what
// the pod-level resources get (podlevel.go).
//
// annotations are added beside ResourceUpdatesAnnotation (the startup
// boosts' records), sorted by key, each key before ResourceUpdatesAnnotation
// in byte order and none already on the pod; they are added even when no
// resource changes.
func (b *patchBuilder) build(shape *podShape, pod *corev1.Pod, desired recommendation.Desired, vpaName string, annotations []annotation) error {
	if !shape.spec || len(shape.containers) != len(pod.Spec.Containers) || len(shape.initContainers) != len(pod.Spec.InitContainers) {
		return fmt.Errorf("the pod's JSON has a different number of containers than the decoded pod")
	}
	if shape.nullContainer {
		return fmt.Errorf("the pod's JSON has a null container")
	}

	b.note = append(append(append(b.note[:0], "Pod resources updated by "...), vpaName...), ": "...)
	noteStart := len(b.note)
	var reqBuf, limBuf [maxNames]corev1.ResourceName
	for ref := range recommendation.Containers(pod) {
		c, i := ref.Container, ref.Index
		want, ok := desired[c.Name]
		if !ok {
			continue
		}
		requests := changed(reqBuf[:0], c.Resources.Requests, want.Requests)
		limits := changed(limBuf[:0], c.Resources.Limits, want.Limits)
		if len(requests) == 0 && len(limits) == 0 {
			continue
		}
		list, shapes, what := containersList, shape.containers, "container "
		if ref.Sidecar {
			// Named as upstream's sidecar support (AEP-8905) names them.
			list, shapes, what = initContainersList, shape.initContainers, "init-sidecar "
		}
		s := shapes[i]
		switch {
		case !s.resources:
			b.addResources(list, i, requests, want.Requests, limits, want.Limits)
		default:
			b.addList(list, i, "requests", s.requests, requests, want.Requests)
			b.addList(list, i, "limits", s.limits, limits, want.Limits)
		}
		if len(b.note) > noteStart {
			b.note = append(b.note, "; "...)
		}
		b.note = append(strconv.AppendInt(append(b.note, what...), int64(i), 10), ": "...)
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
	b.addPodLevel(shape, pod, desired, noteStart)
	note := len(b.note) > noteStart
	if !note && len(annotations) == 0 {
		return nil
	}
	switch {
	case !shape.metadata:
		b.addNote("/metadata", 2, annotations, note)
	case !shape.annotations:
		b.addNote("/metadata/annotations", 1, annotations, note)
	default:
		for _, a := range annotations {
			b.addAnnotation(a)
		}
		if note {
			b.addNote("/metadata/annotations/"+escapePointer(ResourceUpdatesAnnotation), 0, nil, true)
		}
	}
	return nil
}

// annotation is a pod annotation the patch adds.
type annotation struct{ key, value string }

// addAnnotation adds one annotation to the pod's existing annotations map.
func (b *patchBuilder) addAnnotation(a annotation) {
	if !b.toJSON {
		b.ops = append(b.ops, PatchOperation{Op: "add", Path: "/metadata/annotations/" + escapePointer(a.key), Value: a.value})
		return
	}
	b.path = appendPointerToken(append(b.path[:0], "/metadata/annotations/"...), a.key)
	b.openOpPath(b.path)
	b.buf = append(b.buf, `,"value":`...)
	b.buf = append(appendJSONString(b.buf, a.value), '}')
}

// changed appends to dst, sorted, the names whose value in want is missing
// from or different in have.
func changed(dst []corev1.ResourceName, have, want corev1.ResourceList) []corev1.ResourceName {
	for name, q := range want {
		if cur, ok := have[name]; ok && cur.Cmp(q) == 0 {
			continue
		}
		dst = append(dst, name)
	}
	slices.Sort(dst)
	return dst
}

// The lists of the pod spec a patch sets: app containers, and init
// containers (sidecars only).
const (
	containersList     = "/spec/containers/"
	initContainersList = "/spec/initContainers/"
)

// resourcesPath appends "<list><i>/resources": list is containersList or
// initContainersList.
func resourcesPath(dst []byte, list string, i int) []byte {
	return append(strconv.AppendInt(append(dst, list...), int64(i), 10), "/resources"...)
}

// addResources adds a container's whole resources object: {"limits": {...},
// "requests": {...}}, each present when it has names (encoding/json sorts a
// map's keys).
func (b *patchBuilder) addResources(list string, i int, requests []corev1.ResourceName, reqValues corev1.ResourceList,
	limits []corev1.ResourceName, limValues corev1.ResourceList) {
	if !b.toJSON {
		value := map[string]map[string]string{}
		if len(requests) > 0 {
			value["requests"] = asStrings(requests, reqValues)
		}
		if len(limits) > 0 {
			value["limits"] = asStrings(limits, limValues)
		}
		b.ops = append(b.ops, PatchOperation{Op: "add", Path: string(resourcesPath(nil, list, i)), Value: value})
		return
	}
	b.openOp()
	b.buf = resourcesPath(b.buf, list, i)
	b.buf = append(b.buf, `","value":{`...)
	if len(limits) > 0 {
		b.buf = append(b.buf, `"limits":`...)
		b.buf = appendList(b.buf, limits, limValues)
		if len(requests) > 0 {
			b.buf = append(b.buf, ',')
		}
	}
	if len(requests) > 0 {
		b.buf = append(b.buf, `"requests":`...)
		b.buf = appendList(b.buf, requests, reqValues)
	}
	b.buf = append(b.buf, "}}"...)
}

// addList sets names of a container's requests or limits (which) map: one
// operation per name when the map exists, one for the whole map otherwise.
// ("add" of an existing key replaces its value.)
func (b *patchBuilder) addList(list string, i int, which string, exists bool, names []corev1.ResourceName, values corev1.ResourceList) {
	if len(names) == 0 {
		return
	}
	if !exists {
		if !b.toJSON {
			path := string(resourcesPath(nil, list, i)) + "/" + which
			b.ops = append(b.ops, PatchOperation{Op: "add", Path: path, Value: asStrings(names, values)})
			return
		}
		b.openOp()
		b.buf = append(append(resourcesPath(b.buf, list, i), '/'), which...)
		b.buf = append(b.buf, `","value":`...)
		b.buf = append(appendList(b.buf, names, values), '}')
		return
	}
	for _, n := range names {
		q := values[n]
		if !b.toJSON {
			path := string(resourcesPath(nil, list, i)) + "/" + which + "/" + escapePointer(string(n))
			b.ops = append(b.ops, PatchOperation{Op: "add", Path: path, Value: q.String()})
			continue
		}
		// The path is written as a JSON string: escaped twice, as a
		// pointer token, then as JSON.
		b.path = append(append(append(resourcesPath(b.path[:0], list, i), '/'), which...), '/')
		b.path = appendPointerToken(b.path, string(n))
		b.openOpPath(b.path)
		b.buf = append(b.buf, `,"value":`...)
		b.buf = appendJSONString(b.buf, q.String())
		b.buf = append(b.buf, '}')
	}
}

// addNote adds ResourceUpdatesAnnotation (when note is set) and
// annotations at path: the note itself (depth 0, without annotations), an
// annotations map holding them (1), or a metadata object holding that (2).
// encoding/json writes a map's keys sorted: annotations are, and sort before
// ResourceUpdatesAnnotation.
func (b *patchBuilder) addNote(path string, depth int, annotations []annotation, note bool) {
	if !b.toJSON {
		var value any
		if depth == 0 {
			value = string(b.note)
		} else {
			m := make(map[string]string, len(annotations)+1)
			for _, a := range annotations {
				m[a.key] = a.value
			}
			if note {
				m[ResourceUpdatesAnnotation] = string(b.note)
			}
			value = m
			if depth == 2 {
				value = map[string]map[string]string{"annotations": m}
			}
		}
		b.ops = append(b.ops, PatchOperation{Op: "add", Path: path, Value: value})
		return
	}
	b.openOpPath([]byte(path))
	b.buf = append(b.buf, `,"value":`...)
	switch depth {
	case 1:
		b.buf = append(b.buf, '{')
	case 2:
		b.buf = append(b.buf, `{"annotations":{`...)
	}
	for i, a := range annotations {
		if i > 0 {
			b.buf = append(b.buf, ',')
		}
		b.buf = append(appendJSONString(b.buf, a.key), ':')
		b.buf = appendJSONString(b.buf, a.value)
	}
	if note {
		if depth > 0 {
			if len(annotations) > 0 {
				b.buf = append(b.buf, ',')
			}
			b.buf = append(appendJSONString(b.buf, ResourceUpdatesAnnotation), ':')
		}
		b.buf = appendJSONString(b.buf, b.note)
	}
	for range depth {
		b.buf = append(b.buf, '}')
	}
	b.buf = append(b.buf, '}')
}

// openOp starts an "add" operation and its path, left open for a path
// that needs no escaping: "/spec/containers/<i>/..." (or initContainers)
// with a fixed word.
func (b *patchBuilder) openOp() {
	if b.n == 0 {
		b.buf = append(b.buf, '[')
	} else {
		b.buf = append(b.buf, ',')
	}
	b.n++
	b.buf = append(b.buf, `{"op":"add","path":"`...)
}

// openOpPath starts an "add" operation with path, escaped as encoding/json
// escapes a string.
func (b *patchBuilder) openOpPath(path []byte) {
	b.openOp()
	b.buf = b.buf[:len(b.buf)-1] // the opening quote: appendJSONString writes its own
	b.buf = appendJSONString(b.buf, path)
}

// finish returns the JSON Patch written, nil when there is none.
func (b *patchBuilder) finish() []byte {
	if b.n == 0 {
		return nil
	}
	return append(b.buf, ']')
}

// appendList appends a map of names to quantity strings, as encoding/json
// writes a map[string]string (keys sorted; names is).
func appendList(dst []byte, names []corev1.ResourceName, values corev1.ResourceList) []byte {
	dst = append(dst, '{')
	for j, n := range names {
		if j > 0 {
			dst = append(dst, ',')
		}
		q := values[n]
		dst = append(appendJSONString(dst, string(n)), ':')
		dst = appendJSONString(dst, q.String())
	}
	return append(dst, '}')
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

// appendPointerToken appends token escaped as escapePointer escapes it.
func appendPointerToken(dst []byte, token string) []byte {
	for i := 0; i < len(token); i++ {
		switch c := token[i]; c {
		case '~':
			dst = append(dst, "~0"...)
		case '/':
			dst = append(dst, "~1"...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
