package records

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Limits at start (StoreJVM): a JVM whose heap is a share of its memory
// limit sized it once, when it started, from the limit in force then
// (pkg/jvm). A record of KindLimitAtStart keeps, per container, that limit
// (Attempted: memory limits only) and the restart count of the start it
// was in force at (Starts): a later start has a higher count, and the
// record says nothing of it.

// ContainerStart returns the memory limit the record holds for a container
// and the restart count of the start it was in force at. A nil record, or
// one of another kind, holds none.
func (r *Record) ContainerStart(container string) (limit resource.Quantity, restarts int32, ok bool) {
	if r == nil || r.Kind != KindLimitAtStart {
		return resource.Quantity{}, 0, false
	}
	n, counted := r.Starts[container]
	q, limited := r.Attempted[container].Limits[corev1.ResourceMemory]
	if !counted || !limited {
		return resource.Quantity{}, 0, false
	}
	return q, n, true
}

// validStarts tells whether starts may go with an attempt of kind over
// attempted: only KindLimitAtStart has them, and it has a count (not below
// 0) for each container it names, and only for those, each a memory limit.
func validStarts(kind Kind, starts map[string]int32, attempted map[string]corev1.ResourceRequirements) bool {
	if kind != KindLimitAtStart {
		return len(starts) == 0
	}
	if len(starts) == 0 || len(starts) != len(attempted) || len(starts) > MaxContainers {
		return false
	}
	for name, n := range starts {
		if name == "" || len(name) > maxContainerName || n < 0 {
			return false
		}
		r, ok := attempted[name]
		if !ok || len(r.Requests) > 0 || len(r.Limits) != 1 {
			return false
		}
		if _, ok := r.Limits[corev1.ResourceMemory]; !ok {
			return false
		}
	}
	return true
}

// startsKey writes starts in a stable order, for attemptKey.
func startsKey(starts map[string]int32) string {
	if len(starts) == 0 {
		return ""
	}
	names := make([]string, 0, len(starts))
	for name := range starts {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(int64(starts[name]), 10))
		b.WriteByte(' ')
	}
	return b.String()
}
