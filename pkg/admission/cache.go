package admission

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/cachetrim"
)

var _ cache.TransformFunc = CacheTransform

// CacheTransform is the informer transform of the admission controller:
// cachetrim.Transform, the transform both binaries share, and then what
// the pod webhook never reads of what the updater keeps:
//
//   - of a VPA's recommendation, the bounds and the uncapped target: a new
//     pod is given the target, capped by the VPA's policy and the
//     LimitRanges, and capping the target does not read the bounds; and
//     the VPA's conditions;
//   - of Deployments, ReplicaSets, StatefulSets, DaemonSets and
//     ReplicationControllers, the pod template's labels and annotations:
//     target resolution reads their selectors (a CronJob's selector is its
//     template's labels; Jobs and CronJobs are kept whole).
//
// Like cachetrim.Transform it trims the object in place, is idempotent,
// and leaves tombstones as they are.
func CacheTransform(obj any) (any, error) {
	obj, err := cachetrim.Transform(obj)
	if err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *vpatypes.VerticalPodAutoscaler:
		o.Status.Conditions = nil
		if r := o.Status.Recommendation; r != nil {
			for i := range r.ContainerRecommendations {
				c := &r.ContainerRecommendations[i]
				c.LowerBound, c.UpperBound, c.UncappedTarget = nil, nil, nil
			}
		}
	case *appsv1.Deployment:
		dropTemplateMeta(&o.Spec.Template)
	case *appsv1.ReplicaSet:
		dropTemplateMeta(&o.Spec.Template)
	case *appsv1.StatefulSet:
		dropTemplateMeta(&o.Spec.Template)
	case *appsv1.DaemonSet:
		dropTemplateMeta(&o.Spec.Template)
	case *corev1.ReplicationController:
		if o.Spec.Template != nil {
			dropTemplateMeta(o.Spec.Template)
		}
	}
	return obj, nil
}

// dropTemplateMeta drops a pod template's labels and annotations (what
// cachetrim left of its metadata).
func dropTemplateMeta(t *corev1.PodTemplateSpec) {
	t.Labels, t.Annotations = nil, nil
}
