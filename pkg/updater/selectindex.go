package updater

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
)

// labelIndex indexes pods by each of their labels (labelIndexKey), so that
// the pods a VPA's selector picks are found from one of its equality
// requirements instead of by matching every pod of the namespace: queueing
// the pods of every VPA costs the number of their pods, not VPAs × pods.
const labelIndex = "vpa-inplace/label"

func labelIndexKey(namespace, key, value string) string {
	return namespace + "/" + key + "=" + value
}

func indexByLabel(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || len(pod.Labels) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(pod.Labels))
	for k, v := range pod.Labels {
		out = append(out, labelIndexKey(pod.Namespace, k, v))
	}
	return out, nil
}

// selectPods returns the pods of namespace that sel matches. Its candidates
// are the pods indexed under the equality (=, ==, in) requirement that names
// the fewest; a selector without one (only exists, !=, notin) is matched
// against every pod of the namespace.
func selectPods(idx cache.Indexer, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, nil // labels.Nothing()
	}
	var candidates []any
	found := false
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		var objs []any
		for v := range r.Values() {
			o, err := idx.ByIndex(labelIndex, labelIndexKey(namespace, r.Key(), v))
			if err != nil {
				return nil, fmt.Errorf("looking up pods by label: %w", err)
			}
			objs = append(objs, o...)
		}
		if !found || len(objs) < len(candidates) {
			candidates, found = objs, true
		}
	}
	if !found {
		var err error
		candidates, err = idx.ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			return nil, fmt.Errorf("listing the pods of namespace %q: %w", namespace, err)
		}
	}
	var out []*corev1.Pod
	for _, obj := range candidates {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Namespace == namespace && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out, nil
}
