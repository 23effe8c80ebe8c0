package resize

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// The memory limit a JVM started with. A heap sized from the limit
// (-XX:MaxRAMPercentage, the JVM's default, Strimzi's dynamic heap) was
// sized from the limit in force when the container last started, not from
// today's: a resize in place changes the limit, not the heap. The updater
// keeps that limit in the pod's records (records.KindLimitAtStart, with the
// restart count of the start), taken when it sees the start:
//
//   - a record of the container's current start (its restart count) gives
//     its limit;
//   - a start the records do not hold yet is seen now: the limit is the one
//     the container runs with (status.containerStatuses[].resources), when
//     nothing can have changed it since the start: the updater holds a
//     record of an earlier start of the container (it follows the pod, and
//     records each start before it resizes), or the pod was never resized
//     (metadata.generation 1). Otherwise (a pod the updater meets for the
//     first time, resized before) the higher of the spec's limit and the
//     one the container runs with: a heap sized from a higher limit is the
//     larger, and its floor the safer. Without a status, the spec's.
//
// A restart that a resize causes (memory resizePolicy RestartContainer) is
// a start like any other: the record then takes the new limit.

// LimitsAtStart sets j.LimitAtStart for the containers whose heap is sized
// from the memory limit, from rec (the pod's limits at start, or nil), and
// returns the record to keep from now on (SameLimitsAtStart tells whether
// it is rec's), nil when nothing is to be kept (no such container, or none
// with a limit). A nil j sets and keeps nothing.
func (j *JVM) LimitsAtStart(pod *corev1.Pod, rec *records.Record) *records.Record {
	if j == nil {
		return nil
	}
	j.LimitAtStart = map[string]int64{}
	next := &records.Record{Kind: records.KindLimitAtStart, Attempted: resources.Resources{}, Starts: map[string]int32{}}
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		r, ok := j.results[c.Name]
		if !ok || !r.Known || !r.Heap.FromLimit() {
			continue
		}
		st := recommendation.Status(pod, ref)
		var count int32
		if st != nil {
			count = st.RestartCount
		}
		limit, n, recorded := rec.ContainerStart(c.Name)
		switch {
		case recorded && n == count:
			// This start's limit, whatever the container runs with now.
		case st == nil || st.State.Running == nil:
			// Not running: its next start takes what the kubelet gives
			// it then. The record of its last start stays as it is.
			if recorded {
				next.Attempted[c.Name] = memoryLimit(limit)
				next.Starts[c.Name] = n
			}
			if seen, ok := seenLimit(pod, ref, st, false); ok {
				j.LimitAtStart[c.Name] = seen.Value()
			}
			continue
		default:
			seen, ok := seenLimit(pod, ref, st, recorded || pod.Generation <= 1)
			if !ok {
				continue
			}
			limit, n = seen, count
		}
		j.LimitAtStart[c.Name] = limit.Value()
		next.Attempted[c.Name] = memoryLimit(limit)
		next.Starts[c.Name] = n
	}
	if len(next.Attempted) == 0 {
		return nil
	}
	return next
}

// seenLimit is the memory limit a container is taken to have started with
// when no record of its start is held: the one it runs with, when nothing
// can have changed it since (unchanged); otherwise the higher of that one
// and the spec's. ok is false when it has none.
func seenLimit(pod *corev1.Pod, ref recommendation.Ref, st *corev1.ContainerStatus, unchanged bool) (resource.Quantity, bool) {
	spec, inSpec := ref.Container.Resources.Limits[corev1.ResourceMemory]
	var running resource.Quantity
	runs := false
	if st != nil && st.Resources != nil {
		running, runs = st.Resources.Limits[corev1.ResourceMemory]
	}
	switch {
	case runs && (unchanged || !inSpec || running.Cmp(spec) >= 0):
		return running.DeepCopy(), true
	case inSpec:
		return spec.DeepCopy(), true
	}
	return resource.Quantity{}, false
}

func memoryLimit(q resource.Quantity) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q.DeepCopy()}}
}

// SameLimitsAtStart tells whether a and b hold the same limits at start.
func SameLimitsAtStart(a, b *records.Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind || len(a.Starts) != len(b.Starts) || !resources.Equal(a.Attempted, b.Attempted) {
		return false
	}
	for name, n := range a.Starts {
		if m, ok := b.Starts[name]; !ok || m != n {
			return false
		}
	}
	return true
}
