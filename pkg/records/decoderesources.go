package records

// The resources of a record: what the decoder accepts of them, and what the
// encoders may write (nothing the decoder would drop).

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// parseResources parses the resources of an attempt: at most
// MaxContainers containers, cpu and memory only, each quantity checked
// before it is parsed, at least one value. Empty raw is no resources.
func parseResources(raw map[string]rawRequirements) (resources.Resources, bool) {
	if len(raw) == 0 {
		return nil, true
	}
	if len(raw) > MaxContainers {
		return nil, false
	}
	out := make(resources.Resources, len(raw))
	values := 0
	for container, r := range raw {
		requests, n, ok := parseList(r.Requests)
		if !ok {
			return nil, false
		}
		values += n
		limits, n, ok := parseList(r.Limits)
		if !ok {
			return nil, false
		}
		values += n
		out[container] = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
	return out, values > 0
}

// encodable tells whether parseAttempt would accept what r attempted: the
// encoders leave out (and hold in memory only) a record the decoder would
// drop, rather than write it to be dropped at the next load.
func encodable(r *Record) bool {
	if !knownKind(r.Kind) || len(r.Attempted) == 0 || !encodableResources(r.Attempted) || !encodableWatch(r) ||
		!validStarts(r.Kind, r.Starts, r.Attempted) {
		return false
	}
	return len(r.From) == 0 || encodableResources(r.From)
}

// encodableResources tells whether parseResources would accept rs.
func encodableResources(rs resources.Resources) bool {
	if len(rs) > MaxContainers {
		return false
	}
	values := 0
	for _, req := range rs {
		for _, list := range []corev1.ResourceList{req.Requests, req.Limits} {
			if len(list) > 2 {
				return false
			}
			for name, q := range list {
				if name != corev1.ResourceCPU && name != corev1.ResourceMemory || quantity.Check(q.String()) != nil {
					return false
				}
				values++
			}
		}
	}
	return values > 0
}

// parseQuantity parses a quantity that quantity.Check has passed. A
// variable, so that the fuzz test can check what each decode parses.
var parseQuantity = resource.ParseQuantity

// parseList parses a requests or limits list of cpu and memory only.
func parseList(raw map[string]string) (corev1.ResourceList, int, bool) {
	if len(raw) == 0 {
		return nil, 0, true
	}
	if len(raw) > 2 {
		return nil, 0, false
	}
	list := make(corev1.ResourceList, len(raw))
	for name, s := range raw {
		if name != string(corev1.ResourceCPU) && name != string(corev1.ResourceMemory) {
			return nil, 0, false
		}
		if quantity.Check(s) != nil {
			return nil, 0, false
		}
		q, err := parseQuantity(s)
		if err != nil {
			return nil, 0, false
		}
		list[corev1.ResourceName(name)] = q
	}
	return list, len(list), true
}
