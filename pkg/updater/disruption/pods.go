package disruption

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// What the budget reads of pods and PodDisruptionBudgets.

// readySince is when the pod's Ready condition last turned True, or now when
// it does not say (or says a time after now).
func readySince(pod *corev1.Pod, now time.Time) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			if t := c.LastTransitionTime.Time; !t.After(now) {
				return t
			}
		}
	}
	return now
}

// matching returns the PDBs whose selector matches the pod, with
// policy/v1's meaning: an empty selector matches every pod of the namespace,
// a missing one none. A PDB whose selector cannot be read is included, and
// then refuses (pdbAllows): when in doubt, nothing restarts.
func matching(pdbs []*policyv1.PodDisruptionBudget, pod *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range pdbs {
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pdb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// countLive counts the pods the tolerance's share is taken of: neither
// terminated nor being deleted.
func countLive(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if !terminal(p) && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
