package cachetrim

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/lru"
)

// resourceListsKept bounds the interned resource lists. A cluster's distinct
// lists number a few per workload; beyond the bound the least recently seen
// stop being shared, which costs memory, never correctness.
const resourceListsKept = 16384

// resourceLists interns the resource lists of cached pods. A resource list
// is a map of quantities and, once a pod is trimmed, its lists are most of
// what it holds (a container's requests, limits, actual and allocated
// resources); the pods of one workload carry equal ones. Informer caches are
// read-only by contract (whoever changes an object copies it first, as
// DeepCopy copies the maps), so the pods of a cache can share one list.
var resourceLists = lru.New(resourceListsKept)

// intern returns the shared list equal to l, remembering l if it is the
// first of its kind. Lists are equal when each quantity is written the same
// way, so a shared list marshals exactly as l would have.
func intern(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	key := resourceListKey(l)
	if shared, ok := resourceLists.Get(key); ok {
		return shared.(corev1.ResourceList)
	}
	resourceLists.Add(key, l)
	return l
}

func resourceListKey(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		q := l[corev1.ResourceName(name)]
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte('/')
		b.WriteString(string(q.Format))
		b.WriteByte(';')
	}
	return b.String()
}

func internRequirements(r *corev1.ResourceRequirements, in func(corev1.ResourceList) corev1.ResourceList) {
	r.Requests = in(r.Requests)
	r.Limits = in(r.Limits)
}
