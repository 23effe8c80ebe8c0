package resize

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/jvm"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// JVMs (docs/jvm.md). A JVM sizes its heap once, when it starts: an -Xmx,
// or a share of the memory limit in force then. A memory limit lowered in
// place under heap + overhead (the floor, pkg/jvm) leaves the heap where it
// was, and the JVM is OOM-killed later, under load. So the memory of a JVM
// container is lowered in place at most to its floor:
//
//   - its memory limit, when the recommendation lowers it (or adds one),
//     is kept at the floor, never above the limit it runs with;
//   - its memory request likewise where the request binds: when it equals
//     the limit (a Guaranteed pod's request follows its limit, and the QoS
//     class stays) or when the container has no memory limit (the request
//     is then all the memory it is promised: the kubelet evicts first the
//     pods above their requests). With a limit above it, a lower request
//     risks no OOM kill: the kernel kills at the limit.
//   - a JVM whose heap is unknown (what the spec does not show, a VPA
//     annotation that cannot be read) is not lowered in memory at all.
//
// Where the container's memory resizePolicy is RestartContainer, a heap
// sized from the limit starts again from the new one: the floor is then the
// least limit at or above the recommended one whose own heap + overhead fit
// in it. A fixed heap (-Xmx) keeps its floor whatever the policy.

// JVM is what is known of the JVMs of a pod: what pkg/jvm read of each
// container from its spec and its VPA's annotation (InspectJVMs), and the
// memory limit each started with (LimitsAtStart, jvmstart.go).
type JVM struct {
	// results are what pkg/jvm read of the containers that are JVMs, by
	// name; overheads their overheads.
	results   map[string]jvm.Result
	overheads map[string]jvm.Overhead
	// Invalid says why the VPA's annotation cannot be read, "" when it
	// can or there is none: every container is then taken for a JVM
	// whose heap is unknown, and no memory is lowered in place.
	Invalid string
	// LimitAtStart is, by container, the memory limit in force when it
	// last started (bytes); absent for none known.
	LimitAtStart map[string]int64
}

// ReasonAnnotationInvalid is the reason of a container's heap while its
// VPA's annotation cannot be read.
const ReasonAnnotationInvalid jvm.Reason = "JVMAnnotationInvalid"

// InspectJVMs reads the JVMs of pod from its containers' specs and the
// annotations of its VPA (jvm.Annotation). It returns nil when no container
// is a JVM and the VPA declares none.
func InspectJVMs(pod *corev1.Pod, vpaAnnotations map[string]string) *JVM {
	j := &JVM{results: map[string]jvm.Result{}, overheads: map[string]jvm.Overhead{}}
	var decls jvm.Declarations
	if value, ok := vpaAnnotations[jvm.Annotation]; ok {
		d, err := jvm.ParseAnnotation(value)
		if err != nil {
			j.Invalid = err.Error()
		}
		decls = d
	}
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		if j.Invalid != "" {
			j.results[c.Name] = jvm.Result{JVM: true, Reason: ReasonAnnotationInvalid,
				Message: fmt.Sprintf("heap unknown: the VPA's %s annotation cannot be read (%s)", jvm.Annotation, j.Invalid)}
			j.overheads[c.Name] = jvm.DefaultOverhead
			continue
		}
		r := decls.Inspect(c)
		if !r.JVM {
			continue
		}
		d, _ := decls.For(c.Name)
		j.results[c.Name], j.overheads[c.Name] = r, d.OverheadOrDefault()
	}
	if len(j.results) == 0 && j.Invalid == "" {
		return nil
	}
	return j
}

// Result is what pkg/jvm read of a container, and whether it is a JVM.
func (j *JVM) Result(container string) (jvm.Result, bool) {
	if j == nil {
		return jvm.Result{}, false
	}
	r, ok := j.results[container]
	return r, ok
}

// heapAt is the container's heap, in bytes, had it started with limit.
func (j *JVM) heapAt(r jvm.Result, limit int64) (int64, error) {
	return r.Heap.Bytes(limit)
}

// floorOf is a container's floor, in bytes, for a target memory limit of
// want (0: none): heap + overhead; for a heap sized from the limit of a
// container that restarts with the new one, the least limit from want up
// to upper whose heap + overhead fit in it (upper when none does). why says
// why there is none: the heap is unknown.
func (j *JVM) floorOf(ref recommendation.Ref, r jvm.Result, want, upper int64) (floor, heap int64, why string) {
	if !r.Known {
		return 0, 0, r.Message
	}
	o := j.overheads[ref.Container.Name]
	if r.Heap.FromLimit() && policyFor(ref.Container, corev1.ResourceMemory) == corev1.RestartContainer && want > 0 {
		return j.restartFloor(r, o, want, upper)
	}
	basis := j.LimitAtStart[ref.Container.Name]
	heap, err := j.heapAt(r, basis)
	if err != nil {
		return 0, 0, fmt.Sprintf("heap unknown: %s (%v)", r.Heap, err)
	}
	floor, err = jvm.Floor(heap, o)
	if err != nil {
		return 0, 0, fmt.Sprintf("heap unknown: %v", err)
	}
	return floor, heap, ""
}

// restartFloor is the least limit from want to upper (in MiB steps) whose
// own heap + overhead fit in it, for a heap sized from the limit the
// container restarts with; upper when none below does.
func (j *JVM) restartFloor(r jvm.Result, o jvm.Overhead, want, upper int64) (floor, heap int64, why string) {
	fits := func(limit int64) (int64, bool) {
		h, err := r.Heap.Bytes(limit)
		if err != nil {
			return 0, false
		}
		f, err := jvm.Floor(h, o)
		return h, err == nil && f <= limit
	}
	if h, ok := fits(want); ok {
		return want, h, ""
	}
	upper = max(upper, want)
	if _, ok := fits(upper); !ok {
		h, _ := r.Heap.Bytes(upper)
		return upper, h, ""
	}
	// The heap grows more slowly than the limit (its share times one and
	// the overhead's share is below 1 where any limit fits): the limits
	// that fit are those from one on.
	lo, hi := want/jvm.MiB+1, (upper+jvm.MiB-1)/jvm.MiB
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, ok := fits(mid * jvm.MiB); ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	floor = min(lo*jvm.MiB, upper)
	heap, _ = fits(floor)
	return floor, heap, ""
}

// JVMFloored is a JVM container whose memory the floor kept above what the
// recommendation asks.
type JVMFloored struct {
	Container string
	Sidecar   bool
	// Limit and Request are the values kept; nil when not kept.
	Limit, Request *FlooredValue
	// Floor is heap + overhead, Heap the heap and Overhead what it adds
	// (zero Floor: the heap is unknown, and Unknown says why).
	Floor    int64
	Heap     int64
	HeapText string
	Overhead jvm.Overhead
	Unknown  string
	// Restart: the container restarts with the limit and sizes its heap
	// from it again.
	Restart bool
}

// FlooredValue is one value kept: what the pod gets (nil: it keeps none, a
// limit not added) and what the recommendation asks.
type FlooredValue struct {
	Got    *resource.Quantity
	Wanted resource.Quantity
}

// Unknown tells whether the value was kept because the heap is unknown.
func (f JVMFloored) unknown() bool { return f.Unknown != "" }

// String says what was kept and why, for events, logs and the condition.
func (f JVMFloored) String() string {
	who := "container " + f.Container
	if f.Sidecar {
		who = "sidecar " + f.Container
	}
	var kept []string
	for _, v := range []struct {
		name string
		v    *FlooredValue
	}{{"memory limit", f.Limit}, {"memory request", f.Request}} {
		if v.v == nil {
			continue
		}
		got := "none"
		if v.v.Got != nil {
			got = v.v.Got.String()
		}
		kept = append(kept, fmt.Sprintf("%s %s instead of %s", v.name, got, v.v.Wanted.String()))
	}
	if f.unknown() {
		return fmt.Sprintf("%s: %s (a JVM's memory is not lowered in place while its heap is unknown: %s)", who, strings.Join(kept, ", "), f.Unknown)
	}
	heap := bytesText(f.Heap)
	if f.Restart {
		return fmt.Sprintf("%s: %s (JVM heap floor %s: the heap restarts at %s (%s) + overhead %s)",
			who, strings.Join(kept, ", "), bytesText(f.Floor), heap, f.HeapText, f.Overhead)
	}
	return fmt.Sprintf("%s: %s (JVM heap floor %s: heap %s (%s) + overhead %s)",
		who, strings.Join(kept, ", "), bytesText(f.Floor), heap, f.HeapText, f.Overhead)
}

// DescribeFloored says what the floors kept and why, for all of floored.
func DescribeFloored(floored []JVMFloored) string {
	parts := make([]string, len(floored))
	for i, f := range floored {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}

// FlooredUnknown tells whether one of floored was kept because its heap is
// unknown.
func FlooredUnknown(floored []JVMFloored) bool {
	for _, f := range floored {
		if f.unknown() {
			return true
		}
	}
	return false
}

// whence says where a known heap comes from, for messages: "-Xmx1g in
// KAFKA_HEAP_OPTS"; for a heap sized from the limit, of which limit.
func whence(r jvm.Result, limitAtStart int64) string {
	var s string
	switch r.Reason {
	case jvm.ReasonExplicit:
		s = r.Flag + " in " + r.Source
	case jvm.ReasonPercentage:
		s = r.Heap.String() + "; " + r.Flag + " in " + r.Source
	case jvm.ReasonStrimziDynamic:
		s = "Strimzi's dynamic heap, " + r.Heap.String()
	case jvm.ReasonJVMDefault:
		s = "the JVM's default, " + r.Heap.String()
	case jvm.ReasonDeclared:
		s = r.Heap.String() + ", as the VPA's " + jvm.Annotation + " annotation declares"
	default:
		s = r.Heap.String()
	}
	if r.Heap.FromLimit() && limitAtStart > 0 {
		if head, tail, ok := strings.Cut(s, "; "); ok {
			return head + ", " + bytesText(limitAtStart) + "; " + tail
		}
		return s + " (" + bytesText(limitAtStart) + ")"
	}
	return s
}

func bytesText(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }

// applyFloors returns target with the memory of its JVM containers kept at
// their floors, and what was kept. The limits compared with are those the
// containers run with (runningMemoryLimit), the requests the spec's.
func (j *JVM) applyFloors(pod *corev1.Pod, target resources.Resources) (resources.Resources, []JVMFloored) {
	if j == nil {
		return target, nil
	}
	var floored []JVMFloored
	out := target
	copied := false
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		r, isJVM := j.results[c.Name]
		t, named := target[c.Name]
		if !isJVM || !named {
			continue
		}
		f, next, ok := j.floorContainer(pod, ref, r, t)
		if !ok {
			continue
		}
		if !copied {
			out, copied = copyResources(target), true
		}
		out[c.Name] = next
		floored = append(floored, f)
	}
	return out, floored
}

// floorContainer keeps one JVM container's target memory at its floor; ok
// is false when nothing is kept.
func (j *JVM) floorContainer(pod *corev1.Pod, ref recommendation.Ref, r jvm.Result, t corev1.ResourceRequirements) (JVMFloored, corev1.ResourceRequirements, bool) {
	c := ref.Container
	wantLim, setsLim := t.Limits[corev1.ResourceMemory]
	wantReq, setsReq := t.Requests[corev1.ResourceMemory]
	runLim, hasLim := runningMemoryLimit(pod, ref)
	runReq, hasReq := c.Resources.Requests[corev1.ResourceMemory]
	var want, upper int64
	if setsLim {
		want = wantLim.Value()
	}
	if hasLim {
		upper = runLim.Value()
	}
	floor, heap, why := j.floorOf(ref, r, want, upper)
	restart := why == "" && r.Heap.FromLimit() && policyFor(c, corev1.ResourceMemory) == corev1.RestartContainer
	basis := j.LimitAtStart[c.Name]
	if restart {
		basis = floor
	}
	f := JVMFloored{Container: c.Name, Sidecar: ref.Sidecar, Floor: floor, Heap: heap, HeapText: whence(r, basis),
		Overhead: j.overheads[c.Name], Unknown: why, Restart: restart}
	floorQ := resource.NewQuantity(floor, resource.BinarySI)
	next := *t.DeepCopy()
	// The limit: lowered (or added) under the floor, or at all when the
	// heap is unknown.
	if setsLim && (!hasLim || wantLim.Cmp(runLim) < 0) {
		switch {
		case why != "" && hasLim:
			next.Limits[corev1.ResourceMemory] = runLim.DeepCopy()
			f.Limit = &FlooredValue{Got: ptrTo(runLim.DeepCopy()), Wanted: wantLim.DeepCopy()}
		case why != "":
			delete(next.Limits, corev1.ResourceMemory)
			f.Limit = &FlooredValue{Wanted: wantLim.DeepCopy()}
		case wantLim.Cmp(*floorQ) < 0:
			got := floorQ.DeepCopy()
			if hasLim && runLim.Cmp(got) < 0 {
				got = runLim.DeepCopy() // already under its floor: not lowered further
			}
			next.Limits[corev1.ResourceMemory] = got
			f.Limit = &FlooredValue{Got: ptrTo(got.DeepCopy()), Wanted: wantLim.DeepCopy()}
		}
	}
	// The request, where it binds: it follows the limit, or there is none.
	_, limited := next.Limits[corev1.ResourceMemory]
	follows := setsLim && setsReq && wantReq.Cmp(wantLim) == 0
	switch {
	case !setsReq:
	case follows && f.Limit != nil:
		if got := f.Limit.Got; got != nil {
			next.Requests[corev1.ResourceMemory] = got.DeepCopy()
			f.Request = &FlooredValue{Got: ptrTo(got.DeepCopy()), Wanted: wantReq.DeepCopy()}
		}
	case follows || limited:
	case hasReq && wantReq.Cmp(runReq) >= 0:
		// Not lowered.
	case why != "" && hasReq:
		next.Requests[corev1.ResourceMemory] = runReq.DeepCopy()
		f.Request = &FlooredValue{Got: ptrTo(runReq.DeepCopy()), Wanted: wantReq.DeepCopy()}
	case why == "" && wantReq.Cmp(*floorQ) < 0:
		got := floorQ.DeepCopy()
		if hasReq && runReq.Cmp(got) < 0 {
			got = runReq.DeepCopy()
		}
		next.Requests[corev1.ResourceMemory] = got
		f.Request = &FlooredValue{Got: ptrTo(got.DeepCopy()), Wanted: wantReq.DeepCopy()}
	}
	if f.Limit == nil && f.Request == nil {
		return JVMFloored{}, t, false
	}
	return f, next, true
}

// heapNotes says, for each JVM container whose memory limit target raises
// in place, what its heap does: it stays where it was until the container
// restarts (the raise goes to memory off the heap and the page cache); and
// for a container restarted with a new limit, the heap it restarts with.
func (j *JVM) heapNotes(pod *corev1.Pod, target resources.Resources) []string {
	if j == nil {
		return nil
	}
	var notes []string
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		r, isJVM := j.results[c.Name]
		t, named := target[c.Name]
		if !isJVM || !named || !r.Known {
			continue
		}
		want, setsLim := t.Limits[corev1.ResourceMemory]
		run, hasLim := runningMemoryLimit(pod, ref)
		if !setsLim || !hasLim || want.Cmp(run) <= 0 {
			continue
		}
		restart := policyFor(c, corev1.ResourceMemory) == corev1.RestartContainer
		if restart && r.Heap.FromLimit() {
			if h, err := r.Heap.Bytes(want.Value()); err == nil {
				notes = append(notes, fmt.Sprintf("container %s: heap %s after the restart this resize causes (%s)", c.Name, bytesText(h), whence(r, want.Value())))
			}
			continue
		}
		basis := j.LimitAtStart[c.Name]
		h, err := j.heapAt(r, basis)
		if err != nil {
			continue
		}
		switch {
		case restart:
			notes = append(notes, fmt.Sprintf("container %s: heap stays %s (%s), also after the restart this resize causes", c.Name, bytesText(h), whence(r, basis)))
		case r.Heap.FromLimit():
			notes = append(notes, fmt.Sprintf("container %s: heap stays %s until the container restarts (%s)", c.Name, bytesText(h), whence(r, basis)))
		default:
			notes = append(notes, fmt.Sprintf("container %s: heap stays %s until the container restarts with other options (%s)", c.Name, bytesText(h), whence(r, basis)))
		}
	}
	return notes
}
