// Package infeasible remembers resize attempts that cannot succeed, keyed by
// pod UID, so that the same infeasible resize is not sent again and again.
//
// A record holds the values that were attempted: what was patched (kubelet
// reported Infeasible), what the API server refused (403 with a NodeCapacity
// cause), or what validation forbids (422, or a change known to be impossible
// in place). The rules deciding whether a new target may be tried against a
// record follow AEP-8818.
package infeasible

import (
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Kind says why an attempt was recorded.
type Kind string

const (
	// KindInfeasible: the resize was accepted and the kubelet then marked it
	// PodResizePending with reason Infeasible.
	KindInfeasible Kind = "Infeasible"
	// KindNodeCapacity: the API server refused the resize with HTTP 403 and a
	// NodeCapacity cause (Kubernetes 1.36+).
	KindNodeCapacity Kind = "NodeCapacity"
	// KindInvalid: the change cannot be done in place (rejected by
	// validation, or known beforehand to be impossible).
	KindInvalid Kind = "Invalid"
)

// Resources are the cpu and memory requests and limits of each container,
// keyed by container name: the values that were, or would be, patched.
type Resources map[string]corev1.ResourceRequirements

// Record is one remembered attempt.
type Record struct {
	Kind       Kind
	Attempted  Resources
	Message    string
	RecordedAt time.Time
}

// Verdict is the outcome of comparing a new target with a record.
type Verdict int

const (
	// Same: the target is what was attempted. Skip the pod.
	Same Verdict = iota
	// Lower: at least one value is lower than attempted (for KindInvalid:
	// the target differs). Clear the record and try.
	Lower
	// NotLower: every value is greater than or equal to what was attempted
	// and one is greater. It would fail again: skip the pod, keep the record.
	NotLower
)

func (v Verdict) String() string {
	switch v {
	case Same:
		return "Same"
	case Lower:
		return "Lower"
	default:
		return "NotLower"
	}
}

// Compare tells whether target may be tried given this record.
//
// For capacity outcomes (KindInfeasible, KindNodeCapacity) a target is only
// worth trying when it asks for less of something. For KindInvalid any
// different target is worth trying, since validity does not grow with size.
func (r *Record) Compare(target Resources) Verdict {
	equal, lower := true, false
	visit := func(container string, list string, name corev1.ResourceName, attempted, now *resource.Quantity) {
		switch {
		case attempted == nil && now == nil:
		case attempted == nil || now == nil:
			equal = false
			if now == nil {
				lower = true // a value no longer asked for is less than any value
			}
		default:
			if c := now.Cmp(*attempted); c != 0 {
				equal = false
				if c < 0 {
					lower = true
				}
			}
		}
	}
	forEachValue(r.Attempted, target, visit)
	switch {
	case equal:
		return Same
	case r.Kind == KindInvalid || lower:
		return Lower
	default:
		return NotLower
	}
}

// forEachValue calls fn for every (container, requests|limits, resource)
// present in a or b, in a stable order.
func forEachValue(a, b Resources, fn func(container, list string, name corev1.ResourceName, av, bv *resource.Quantity)) {
	containers := map[string]bool{}
	for c := range a {
		containers[c] = true
	}
	for c := range b {
		containers[c] = true
	}
	names := make([]string, 0, len(containers))
	for c := range containers {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		ar, br := a[c], b[c]
		for _, list := range []string{"requests", "limits"} {
			al, bl := ar.Requests, br.Requests
			if list == "limits" {
				al, bl = ar.Limits, br.Limits
			}
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				fn(c, list, name, get(al, name), get(bl, name))
			}
		}
	}
}

func get(l corev1.ResourceList, name corev1.ResourceName) *resource.Quantity {
	if q, ok := l[name]; ok {
		return &q
	}
	return nil
}

// Equal reports whether two Resources hold the same values.
func Equal(a, b Resources) bool {
	eq := true
	forEachValue(a, b, func(_, _ string, _ corev1.ResourceName, av, bv *resource.Quantity) {
		if (av == nil) != (bv == nil) || (av != nil && av.Cmp(*bv) != 0) {
			eq = false
		}
	})
	return eq
}

// String renders Resources compactly and deterministically, for events,
// logs and status: "c: requests cpu=200m memory=200Mi, limits cpu=400m".
func (r Resources) String() string {
	names := make([]string, 0, len(r))
	for c := range r {
		names = append(names, c)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, c := range names {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c)
		b.WriteString(":")
		for _, part := range []struct {
			label string
			list  corev1.ResourceList
		}{{"requests", r[c].Requests}, {"limits", r[c].Limits}} {
			if len(part.list) == 0 {
				continue
			}
			b.WriteString(" " + part.label)
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := part.list[name]; ok {
					b.WriteString(" " + string(name) + "=" + q.String())
				}
			}
		}
	}
	return b.String()
}

// Store holds records by pod UID. Implementations are safe for concurrent
// use. The in-memory store below is the default; a durable one can replace
// it behind this interface.
type Store interface {
	// Get returns the record of a pod, if any.
	Get(uid types.UID) (*Record, bool)
	// Put stores or replaces the record of a pod.
	Put(uid types.UID, r *Record)
	// Delete forgets a pod's record; it reports whether there was one.
	Delete(uid types.UID) bool
	// Retain forgets every record whose pod is not live and returns the UIDs
	// it forgot.
	Retain(live func(types.UID) bool) []types.UID
	// Len is the number of records held.
	Len() int
}

// MemoryStore is a Store kept in memory.
type MemoryStore struct {
	mu      sync.RWMutex
	records map[types.UID]*Record
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: map[types.UID]*Record{}}
}

// Get implements Store.
func (s *MemoryStore) Get(uid types.UID) (*Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.records[uid]
	return r, ok
}

// Put implements Store.
func (s *MemoryStore) Put(uid types.UID, r *Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[uid] = r
}

// Delete implements Store.
func (s *MemoryStore) Delete(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.records[uid]
	delete(s.records, uid)
	return ok
}

// Retain implements Store.
func (s *MemoryStore) Retain(live func(types.UID) bool) []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var forgotten []types.UID
	for uid := range s.records {
		if !live(uid) {
			delete(s.records, uid)
			forgotten = append(forgotten, uid)
		}
	}
	sort.Slice(forgotten, func(i, j int) bool { return forgotten[i] < forgotten[j] })
	return forgotten
}

// Len implements Store.
func (s *MemoryStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.records)
}
