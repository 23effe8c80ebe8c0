package target

import (
	"fmt"
	"slices"

	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// The indexes of VPAs the Resolver reads, so that a pod looks only at the
// VPAs that may control it: by the namespace, kind and name of their
// targetRef (rules 1 and 2 of the package comment), by namespace for those
// whose targetRef may name a custom resource (rule 3), and the namespace
// index, which tells whether a namespace holds a VPA at all.

// targetRefIndex is the index of VPAs by the namespace, kind and name of
// their targetRef (the API group apart): the only VPAs that can control a
// pod are those indexed under its top-most controller, or under the custom
// resource that controls it.
const targetRefIndex = "vpa-inplace.dev/target-ref"

// customTargetIndex is the index of VPAs whose targetRef may name a custom
// resource (customOwner) by namespace: the targets the walk up a pod's
// owners looks for (rule 3).
const customTargetIndex = "vpa-inplace.dev/custom-target-namespace"

func indexByCustomTarget(obj any) ([]string, error) {
	vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok || vpa.Spec.TargetRef == nil {
		return nil, nil
	}
	ref := vpa.Spec.TargetRef
	if _, ok := customOwner(vpa.Namespace, ref.APIVersion, ref.Kind, ref.Name); !ok {
		return nil, nil
	}
	return []string{vpa.Namespace}, nil
}

func targetRefKey(namespace, kind, name string) string {
	return namespace + "/" + kind + "/" + name
}

func indexByTargetRef(obj any) ([]string, error) {
	vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok || vpa.Spec.TargetRef == nil {
		return nil, nil
	}
	return []string{targetRefKey(vpa.Namespace, vpa.Spec.TargetRef.Kind, vpa.Spec.TargetRef.Name)}, nil
}

// indexVPAs adds to a VPA indexer (an informer's, before it starts) the
// indexes the Resolver reads: targetRefIndex and, when missing, the
// namespace index. Adding them again is a no-op.
func indexVPAs(indexer cache.Indexer) error {
	have := indexer.GetIndexers()
	add := cache.Indexers{}
	if _, ok := have[targetRefIndex]; !ok {
		add[targetRefIndex] = indexByTargetRef
	}
	if _, ok := have[cache.NamespaceIndex]; !ok {
		add[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	}
	if _, ok := have[customTargetIndex]; !ok {
		add[customTargetIndex] = indexByCustomTarget
	}
	if len(add) == 0 {
		return nil
	}
	if err := indexer.AddIndexers(add); err != nil {
		return fmt.Errorf("indexing VPAs by target: %w", err)
	}
	return nil
}

// hasVPAs reports whether namespace holds a VPA. The namespace index keeps
// no empty entries, so its values are the namespaces that hold VPAs: one
// string per such namespace, whatever their number of VPAs.
func (r *Resolver) hasVPAs(namespace string) bool {
	return slices.Contains(r.vpas.ListIndexFuncValues(cache.NamespaceIndex), namespace)
}

// byTargetRef returns the VPAs whose targetRef names kind and name in
// namespace, whatever its API group.
func (r *Resolver) byTargetRef(namespace, kind, name string) ([]*vpatypes.VerticalPodAutoscaler, error) {
	objs, err := r.vpas.ByIndex(targetRefIndex, targetRefKey(namespace, kind, name))
	if err != nil {
		return nil, fmt.Errorf("looking up VPAs by target: %w", err)
	}
	out := make([]*vpatypes.VerticalPodAutoscaler, 0, len(objs))
	for _, obj := range objs {
		if vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler); ok {
			out = append(out, vpa)
		}
	}
	return out, nil
}

// HasVPAs reports whether namespace holds a VPA, for callers that can skip
// work (decoding a pod under admission) when it does not.
func (r *Resolver) HasVPAs(namespace string) bool { return r.hasVPAs(namespace) }
