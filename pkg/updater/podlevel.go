package updater

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
)

// nodeFeatures returns the features the node of pod declares
// (node.status.declaredFeatures) and whether the node was read:
// they tell whether the pod's pod-level resources may change in place
// (pkg/resize/podlevel.go). Only a pod with pod-level resources needs them.
// A node not in the cache is not known: the pod's status decides then.
func (c *Controller) nodeFeatures(pod *corev1.Pod) ([]string, bool) {
	if c.nodes == nil || pod.Spec.NodeName == "" || !recommendation.PodLevelSet(pod) {
		return nil, false
	}
	n, err := c.nodes.Get(pod.Spec.NodeName)
	if err != nil {
		return nil, false
	}
	return n.Status.DeclaredFeatures, true
}
