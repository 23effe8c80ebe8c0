package target

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"
)

// JobController returns the kind and name of the controller whose VPA
// controls a Job's pods, by upstream's rule for pods (the top-most
// well-known controller): the CronJob that controls the Job, or the Job
// itself when nothing controls it. A Job controlled by anything else (a
// JobSet, a custom resource) is not handled: ok is false, because upstream
// may attribute its pods to that owner (when it exposes /scale) and the Job's
// template would then be changed by a VPA that does not control its pods.
func JobController(job *batchv1.Job) (kind, name string, ok bool) {
	for _, ref := range job.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == batchv1.GroupName && ref.Kind == "CronJob" {
			return "CronJob", ref.Name, true
		}
		return "", "", false
	}
	return "Job", job.Name, true
}

// VPAForJob returns the VPA that controls the pods of job, or nil: among the
// VPAs of the Job's namespace whose targetRef names its controller (see
// JobController) in group batch and whose target's selector matches the
// template's labels, the oldest (upstream's rule for pods). The VPA's mode is
// not looked at.
func (r *Resolver) VPAForJob(ctx context.Context, job *batchv1.Job) (*vpatypes.VerticalPodAutoscaler, error) {
	kind, name, ok := JobController(job)
	if !ok {
		return nil, nil
	}
	vpas, err := r.byTargetRef(job.Namespace, kind, name)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	var best *vpatypes.VerticalPodAutoscaler
	for _, vpa := range vpas {
		if !TargetsBatch(vpa, kind, name) {
			continue
		}
		t, err := r.Target(ctx, vpa)
		if err != nil {
			logger.V(4).Info("Cannot resolve VPA target", "vpa", klog.KObj(vpa), "err", err)
			continue
		}
		if t.Selector == nil || !t.Selector.Matches(labels.Set(job.Spec.Template.Labels)) {
			continue
		}
		if vpaapiutil.Stronger(vpa, best) {
			best = vpa
		}
	}
	return best, nil
}

// TargetsBatch reports whether the VPA's targetRef names the batch object
// kind/name.
func TargetsBatch(vpa *vpatypes.VerticalPodAutoscaler, kind, name string) bool {
	ref := vpa.Spec.TargetRef
	if ref == nil || ref.Kind != kind || ref.Name != name {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == batchv1.GroupName
}
