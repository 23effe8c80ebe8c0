// Package resources holds the cpu and memory requests and limits of a pod's
// containers, as the updater compares, records and reports them.
package resources

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources are the cpu and memory requests and limits of each container,
// keyed by container name: the values that were, or would be, patched.
type Resources map[string]corev1.ResourceRequirements

// ForEachValue calls fn for every (container, requests|limits, resource)
// present in a or b, in a stable order.
func ForEachValue(a, b Resources, fn func(container, list string, name corev1.ResourceName, av, bv *resource.Quantity)) {
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
	ForEachValue(a, b, func(_, _ string, _ corev1.ResourceName, av, bv *resource.Quantity) {
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

// PodLevel is the key under which Resources holds the pod-level requests and
// limits (spec.resources, KEP-2837) of a pod whose resize changes them. It
// cannot be a container's name: container names are DNS labels, without
// parentheses. String renders it first.
const PodLevel = "(pod)"
