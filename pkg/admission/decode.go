package admission

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"

	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
)

// Bounds on the parts of a new pod that are decoded only when they are
// needed: a pod whose labels or owner references exceed them is admitted
// unchanged (the API server refuses far smaller ones: labels are at most 63
// characters a value, annotations 256 KiB in all).
const (
	maxPodLabelsBytes          = 256 << 10
	maxPodOwnerReferencesBytes = 64 << 10
	// maxPodAnnotationsBytes bounds the annotations read when a container
	// may be boosted (the API server's bound on all of a pod's).
	maxPodAnnotationsBytes = 256 << 10
)

// podView is what the mutation of a new pod reads of it, as the reference
// path decodes it (see jsonread.go). The rest of the pod's JSON is scanned
// by the decoder and never kept; labels and owner references are kept raw
// until their bounds are checked.
type podView struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   *podMetaView `json:"metadata"`
	Spec       *podSpecView `json:"spec"`
}

type podMetaView struct {
	Name            string   `json:"name"`
	GenerateName    string   `json:"generateName"`
	Namespace       string   `json:"namespace"`
	Labels          rawValue `json:"labels"`
	Annotations     rawValue `json:"annotations"`
	OwnerReferences rawValue `json:"ownerReferences"`
}

type podSpecView struct {
	Containers     []*containerView `json:"containers"`
	InitContainers []*containerView `json:"initContainers"`
	// Resources are the pod-level resources (nil when absent or null).
	Resources *resourcesView `json:"resources"`
}

type containerView struct {
	Name          string                         `json:"name"`
	Resources     *resourcesView                 `json:"resources"`
	ResizePolicy  []corev1.ContainerResizePolicy `json:"resizePolicy"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`
	// Command, Args, Env and EnvFrom are kept raw: they are decoded only
	// for a container whose memory the recommendation sets (jvm.go).
	Command rawValue `json:"command"`
	Args    rawValue `json:"args"`
	Env     rawValue `json:"env"`
	EnvFrom rawValue `json:"envFrom"`
}

type resourcesView struct {
	// Nil when absent or null; a map, even empty, when present.
	Requests *boundedList `json:"requests"`
	Limits   *boundedList `json:"limits"`
}

// boundedList is a requests or limits map whose quantities are checked
// against pkg/quantity's bound before they are parsed.
type boundedList map[corev1.ResourceName]boundedQuantity

func (l *boundedList) present() bool { return l != nil }

// resourceList returns l as a ResourceList (nil for nil).
func (l *boundedList) resourceList() corev1.ResourceList {
	if l == nil {
		return nil
	}
	out := make(corev1.ResourceList, len(*l))
	for name, q := range *l {
		out[name] = q.q
	}
	return out
}

// boundedQuantity decodes as resource.Quantity does, after pkg/quantity's
// check.
type boundedQuantity struct{ q resource.Quantity }

func (b *boundedQuantity) UnmarshalJSON(v []byte) error {
	if bytes.Equal(v, []byte("null")) {
		b.q = resource.Quantity{}
		return nil
	}
	if l := len(v); l >= 2 && v[0] == '"' && v[l-1] == '"' {
		v = v[1 : l-1]
	}
	q, err := quantity.Parse(strings.TrimSpace(string(v)))
	if err != nil {
		return err
	}
	b.q = q
	return nil
}

// podShape tells which maps of a new pod's JSON exist: the patch adds a
// map where there is none and sets a key where there is one.
type podShape struct {
	metadata    bool
	annotations bool
	// annotationsJSON is the annotations object as received (nil when
	// absent or null), read only when a container may be boosted.
	annotationsJSON rawValue
	spec            bool
	// containers has one entry per element of spec.containers, and
	// initContainers per element of spec.initContainers (a null one has a
	// zero entry: it is no sidecar, and never patched).
	containers     []containerShape
	initContainers []containerShape
	// nullContainer is a null element in spec.containers.
	nullContainer bool
	// podLevel is the shape of the pod-level resources (spec.resources).
	podLevel containerShape
}

type containerShape struct {
	resources, requests, limits bool
	// spec is what pkg/jvm reads of the container, as received.
	spec containerSpecJSON
}

// containerSpecJSON is a container's command, args, env and envFrom as
// received (nil when absent or null), decoded only when the heap of a JVM
// may bound its memory (jvm.go).
type containerSpecJSON struct {
	command, args, env, envFrom rawValue
}

// shape returns which maps of the pod's JSON exist.
func (v *podView) shape() *podShape {
	s := &podShape{metadata: v.Metadata != nil, spec: v.Spec != nil}
	s.podLevel = v.podLevelShape()
	if v.Metadata != nil {
		s.annotations = v.Metadata.Annotations.present()
		s.annotationsJSON = v.Metadata.Annotations
	}
	if v.Spec == nil {
		return s
	}
	s.containers, s.nullContainer = containerShapes(v.Spec.Containers)
	s.initContainers, _ = containerShapes(v.Spec.InitContainers)
	return s
}

// containerShapes returns the shapes of a list of containers (nil for an
// empty list), and whether one is null.
func containerShapes(views []*containerView) (shapes []containerShape, null bool) {
	if len(views) > 0 {
		shapes = make([]containerShape, len(views))
	}
	for i, c := range views {
		if c == nil {
			null = true
			continue
		}
		if c.Resources != nil {
			shapes[i] = containerShape{resources: true, requests: c.Resources.Requests.present(), limits: c.Resources.Limits.present()}
		}
		shapes[i].spec = containerSpecJSON{command: c.Command, args: c.Args, env: c.Env, envFrom: c.EnvFrom}
	}
	return shapes, null
}

// decodePod decodes what the mutation of a new pod reads of it: the pod as
// the VPA lookup and the recommendation processing read it (see
// podView.pod), and the shape of its JSON. namespace is the request's. The
// error is errPodTooLarge, wrapped, for a pod over the bounds above.
func decodePod(raw []byte, namespace string) (*corev1.Pod, *podShape, error) {
	if pod, shape, ok := decodePodFast(raw, namespace); ok {
		return pod, shape, nil
	}
	return decodePodReference(raw, namespace)
}

// decodePodReference is decodePod through sigsjson.
func decodePodReference(raw []byte, namespace string) (*corev1.Pod, *podShape, error) {
	view, err := decodePodView(raw)
	if err != nil {
		return nil, nil, err
	}
	pod, err := view.pod(namespace)
	if errors.Is(err, errPodTooLarge) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("decoding a v1 Pod: %w", err)
	}
	return pod, view.shape(), nil
}

// decodePodView decodes the parts of a v1 Pod that the mutation needs.
func decodePodView(raw []byte) (*podView, error) {
	if len(raw) == 0 {
		return nil, errors.New("missing: expected a v1 Pod")
	}
	var v podView
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &v); err != nil {
		return nil, fmt.Errorf("decoding a v1 Pod: %w", err)
	}
	if (v.APIVersion != "" || v.Kind != "") && (v.APIVersion != "v1" || v.Kind != "Pod") {
		return nil, fmt.Errorf("expected kind Pod of apiVersion v1, got kind %q of apiVersion %q", v.Kind, v.APIVersion)
	}
	return &v, nil
}

// errPodTooLarge is a pod whose labels or owner references exceed the
// bounds above.
var errPodTooLarge = errors.New("too large")

// pod returns the pod as the VPA lookup and the recommendation processing
// read it: namespace, names, labels, owner references, and the containers'
// names, resources, resize policies and restart policies, and the pod-level
// resources.
func (v *podView) pod(namespace string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	pod.Namespace = namespace
	if m := v.Metadata; m != nil {
		pod.Name, pod.GenerateName = m.Name, m.GenerateName
		if pod.Namespace == "" {
			pod.Namespace = m.Namespace
		}
		if len(m.Labels) > maxPodLabelsBytes {
			return nil, fmt.Errorf("labels of %d bytes, more than %d: %w", len(m.Labels), maxPodLabelsBytes, errPodTooLarge)
		}
		if len(m.OwnerReferences) > maxPodOwnerReferencesBytes {
			return nil, fmt.Errorf("owner references of %d bytes, more than %d: %w", len(m.OwnerReferences), maxPodOwnerReferencesBytes, errPodTooLarge)
		}
		if m.Labels.present() {
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(m.Labels, &pod.Labels); err != nil {
				return nil, fmt.Errorf("decoding the labels: %w", err)
			}
		}
		if m.OwnerReferences.present() {
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(m.OwnerReferences, &pod.OwnerReferences); err != nil {
				return nil, fmt.Errorf("decoding the owner references: %w", err)
			}
		}
	}
	if s := v.Spec; s != nil {
		pod.Spec.Containers = containers(s.Containers)
		pod.Spec.InitContainers = containers(s.InitContainers)
		if r := s.Resources; r != nil {
			pod.Spec.Resources = &corev1.ResourceRequirements{Requests: r.Requests.resourceList(), Limits: r.Limits.resourceList()}
		}
	}
	return pod, nil
}

func containers(views []*containerView) []corev1.Container {
	if views == nil {
		return nil
	}
	out := make([]corev1.Container, len(views))
	for i, c := range views {
		if c == nil {
			continue
		}
		out[i] = corev1.Container{Name: c.Name, ResizePolicy: c.ResizePolicy, RestartPolicy: c.RestartPolicy}
		if c.Resources != nil {
			out[i].Resources = corev1.ResourceRequirements{Requests: c.Resources.Requests.resourceList(), Limits: c.Resources.Limits.resourceList()}
		}
	}
	return out
}
