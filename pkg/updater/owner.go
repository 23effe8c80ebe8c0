package updater

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

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

// RecordLive tells whether uid is a pod or a Job in the caches, in owner's
// namespace: the records Load keeps (records.VPAStoreConfig.Live). Records
// of pods that are gone, or of another namespace's pods, are dropped there.
// It is two index lookups, whatever the pods' ownerReferences say: Load
// runs before any worker and never walks owners (1,000 records of pods with
// 32 ownerReferences each took 32,000 reads). Whether the pod's VPA is
// owner is told when the pod is synced, from the VPA the sync resolves
// anyway: a record held for another VPA is then forgotten
// (records.Store.GetFor), and a failed lookup forgets nothing. The caches
// must have synced.
func (c *Controller) RecordLive(owner records.Owner, uid types.UID) bool {
	if objs, err := c.podIdx.ByIndex(uidIndex, string(uid)); err == nil {
		for _, o := range objs {
			if pod, ok := o.(*corev1.Pod); ok && pod.Namespace == owner.Namespace {
				return true
			}
		}
	}
	if c.jobIdx == nil {
		return false
	}
	objs, err := c.jobIdx.ByIndex(uidIndex, string(uid))
	if err != nil {
		return false
	}
	for _, o := range objs {
		if job, ok := o.(*batchv1.Job); ok && job.Namespace == owner.Namespace {
			return true
		}
	}
	return false
}

// SafetyRecordLive is RecordLive for the safety records: a hold is keyed by
// its VPA's own UID.
func (c *Controller) SafetyRecordLive(owner records.Owner, uid types.UID) bool {
	return uid == owner.UID || c.RecordLive(owner, uid)
}
