package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
)

// MinReady tells how long a pod must stay Ready after a restart before the
// next pod of its workload may go: the spec.minReadySeconds of its
// controller (a ReplicaSet carries its Deployment's), or Default when the
// controller sets none, is not in the cache, or is not a well-known one.
type MinReady struct {
	ReplicaSets  appslisters.ReplicaSetLister
	StatefulSets appslisters.StatefulSetLister
	DaemonSets   appslisters.DaemonSetLister
	// Default is --restart-min-ready.
	Default time.Duration
}

// For returns the time pod must stay Ready after its restart.
func (m MinReady) For(pod *corev1.Pod) time.Duration {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.APIVersion != "apps/v1" {
		return m.Default
	}
	var seconds int32
	switch ref.Kind {
	case "ReplicaSet":
		if m.ReplicaSets != nil {
			if rs, err := m.ReplicaSets.ReplicaSets(pod.Namespace).Get(ref.Name); err == nil && rs.UID == ref.UID {
				seconds = rs.Spec.MinReadySeconds
			}
		}
	case "StatefulSet":
		if m.StatefulSets != nil {
			if ss, err := m.StatefulSets.StatefulSets(pod.Namespace).Get(ref.Name); err == nil && ss.UID == ref.UID {
				seconds = ss.Spec.MinReadySeconds
			}
		}
	case "DaemonSet":
		if m.DaemonSets != nil {
			if ds, err := m.DaemonSets.DaemonSets(pod.Namespace).Get(ref.Name); err == nil && ds.UID == ref.UID {
				seconds = ds.Spec.MinReadySeconds
			}
		}
	}
	if seconds <= 0 {
		return m.Default
	}
	return time.Duration(seconds) * time.Second
}
