package updater

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
)

// uidIndex indexes pods and Jobs by UID: records name them by UID.
const uidIndex = "vpa-inplace/uid"

func indexByUID(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	return []string{string(m.GetUID())}, nil
}

// OwnsRecord tells whether uid is a pod or a Job in the caches whose VPA is
// owner (same namespace, name and UID). Records are read from annotations
// that anyone who may edit a VPA can write: a record is only believed for
// the VPA's own pods and Jobs, so that one tenant's VPA cannot hold back
// another's pods. The caches must have synced.
func (c *Controller) OwnsRecord(ctx context.Context, owner records.Owner, uid types.UID) bool {
	objs, err := c.podIdx.ByIndex(uidIndex, string(uid))
	if err == nil {
		for _, o := range objs {
			pod, ok := o.(*corev1.Pod)
			if !ok || pod.Namespace != owner.Namespace {
				continue
			}
			vpa, err := c.resolver.VPAForPod(ctx, pod)
			if err != nil {
				klog.FromContext(ctx).V(2).Info("Cannot tell the VPA of a recorded pod; its record is not kept", "pod", klog.KObj(pod), "err", err)
				return false
			}
			return vpa != nil && vpa.Namespace == owner.Namespace && vpa.Name == owner.Name && (owner.UID == "" || vpa.UID == owner.UID)
		}
	}
	if c.jobIdx == nil {
		return false
	}
	objs, err = c.jobIdx.ByIndex(uidIndex, string(uid))
	if err != nil {
		return false
	}
	for _, o := range objs {
		job, ok := o.(*batchv1.Job)
		if !ok || job.Namespace != owner.Namespace {
			continue
		}
		vpa, err := c.resolver.VPAForJob(ctx, job)
		if err != nil {
			return false
		}
		return vpa != nil && vpa.Namespace == owner.Namespace && vpa.Name == owner.Name && (owner.UID == "" || vpa.UID == owner.UID)
	}
	return false
}
