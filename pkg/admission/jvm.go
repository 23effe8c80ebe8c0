package admission

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/jvm"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
)

// JVMFloorAnnotation is the pod annotation that says which memory of a new
// pod's JVM containers was raised to their heap floor (heap + overhead,
// docs/jvm.md) instead of the lower value recommended: "container kafka:
// memory limit 1690Mi instead of 800Mi (heap 1Gi, -Xmx1g in
// KAFKA_HEAP_OPTS, + overhead 512Mi+15%)". Informational; nothing reads it
// back.
const JVMFloorAnnotation = "vpa-inplace.dev/jvm-heap-floor"

// Bounds of what is decoded of a new pod for its JVMs.
const (
	// maxJVMSpecBytes bounds the JSON of one container's command, args,
	// env and envFrom decoded (pkg/jvm bounds what it reads of them
	// further).
	maxJVMSpecBytes = 1 << 20
	// maxJVMFloorAnnotation bounds JVMFloorAnnotation's value.
	maxJVMFloorAnnotation = 1024
)

// jvmFloors raises, in what desired gives a new pod, the memory of each
// container whose spec states a fixed heap (-Xmx, or one its VPA declares)
// to the heap's floor: a limit under heap + overhead is an OOM kill at the
// pod's first load. The memory limit is raised when the recommendation sets
// it under the floor; the memory request with it when it follows the limit
// (a Guaranteed pod stays Guaranteed), or when the container has no limit
// (the request is then all the memory it is promised), as the updater does
// in place. A heap sized from the limit starts from the limit given here,
// and is left to it. It returns desired (itself when nothing is raised: it
// may be shared, and is never changed), the annotation saying what was
// raised, and why the VPA's annotation could not be read ("" when it
// could, or there is none).
func jvmFloors(shape *podShape, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, desired recommendation.Desired) (recommendation.Desired, []annotation, string) {
	var decls jvm.Declarations
	problem := ""
	if value, ok := vpa.Annotations[jvm.Annotation]; ok {
		d, err := jvm.ParseAnnotation(value)
		if err != nil {
			problem = err.Error()
		}
		decls = d
	}
	var out recommendation.Desired
	var raised []string
	for ref := range recommendation.Containers(pod) {
		want, ok := desired[ref.Container.Name]
		if !ok || !setsMemory(want) {
			continue
		}
		shapes := shape.containers
		if ref.Sidecar {
			shapes = shape.initContainers
		}
		if ref.Index >= len(shapes) {
			continue
		}
		c, ok := withSpec(ref.Container, shapes[ref.Index].spec)
		if !ok {
			continue
		}
		r := decls.Inspect(c)
		if !r.Known || r.Heap.FromLimit() {
			continue
		}
		heap, err := r.Heap.Bytes(0)
		if err != nil {
			continue
		}
		d, _ := decls.For(c.Name)
		o := d.OverheadOrDefault()
		floor, err := jvm.Floor(heap, o)
		if err != nil {
			continue
		}
		next, what := raiseToFloor(c, want, *resource.NewQuantity(floor, resource.BinarySI))
		if what == "" {
			continue
		}
		if out == nil {
			out = maps.Clone(desired)
		}
		out[c.Name] = next
		raised = append(raised, fmt.Sprintf("container %s: %s (heap %s, %s, + overhead %s)", c.Name, what,
			resource.NewQuantity(heap, resource.BinarySI), heapWhence(r), o))
	}
	if out == nil {
		return desired, nil, problem
	}
	return out, []annotation{{key: JVMFloorAnnotation, value: truncateNote(strings.Join(raised, "; "), maxJVMFloorAnnotation)}}, problem
}

func setsMemory(c recommendation.Container) bool {
	_, req := c.Requests[corev1.ResourceMemory]
	_, lim := c.Limits[corev1.ResourceMemory]
	return req || lim
}

// withSpec returns a copy of c with its command, args, env and envFrom
// decoded from what the pod's JSON holds; false when they are too large or
// cannot be decoded (nothing is then raised: the API server refuses such a
// pod anyway).
func withSpec(c *corev1.Container, spec containerSpecJSON) (*corev1.Container, bool) {
	if len(spec.command)+len(spec.args)+len(spec.env)+len(spec.envFrom) > maxJVMSpecBytes {
		return nil, false
	}
	out := &corev1.Container{Name: c.Name, Resources: c.Resources}
	for _, f := range []struct {
		raw rawValue
		to  any
	}{{spec.command, &out.Command}, {spec.args, &out.Args}, {spec.env, &out.Env}, {spec.envFrom, &out.EnvFrom}} {
		if !f.raw.present() {
			continue
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(f.raw, f.to); err != nil {
			return nil, false
		}
	}
	return out, true
}

// raiseToFloor raises what want gives c under floor, as jvmFloors says,
// and says what it raised ("" for nothing).
func raiseToFloor(c *corev1.Container, want recommendation.Container, floor resource.Quantity) (recommendation.Container, string) {
	lim, setsLim := want.Limits[corev1.ResourceMemory]
	req, setsReq := want.Requests[corev1.ResourceMemory]
	_, ownLimit := c.Resources.Limits[corev1.ResourceMemory]
	var what []string
	next := want
	if setsLim && lim.Cmp(floor) < 0 {
		next.Limits = want.Limits.DeepCopy()
		next.Limits[corev1.ResourceMemory] = floor.DeepCopy()
		what = append(what, fmt.Sprintf("memory limit %s instead of %s", floor.String(), lim.String()))
	}
	follows := setsLim && setsReq && req.Cmp(lim) == 0
	unlimited := !setsLim && !ownLimit
	if setsReq && req.Cmp(floor) < 0 && (follows || unlimited) {
		next.Requests = want.Requests.DeepCopy()
		next.Requests[corev1.ResourceMemory] = floor.DeepCopy()
		what = append(what, fmt.Sprintf("memory request %s instead of %s", floor.String(), req.String()))
	}
	return next, strings.Join(what, ", ")
}

// heapWhence says where a fixed heap comes from: "-Xmx1g in
// KAFKA_HEAP_OPTS", or the VPA's declaration.
func heapWhence(r jvm.Result) string {
	if r.Reason == jvm.ReasonDeclared {
		return "as the VPA's " + jvm.Annotation + " annotation declares"
	}
	return r.Flag + " in " + r.Source
}
