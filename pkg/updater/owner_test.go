package updater

import (
	"testing"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// Load keeps a record of a pod or Job in the caches, in the namespace of
// the VPA holding it, and nothing else: no owner is walked. Whether the
// VPA is the pod's is told at the pod's first sync (GetFor; see
// TestAnotherVPAOfTheNamespaceHoldsNoPodBack).
func TestRecordLive(t *testing.T) {
	other := testvpa.New("db").Target("apps/v1", "Deployment", "db").InPlace().Recommend("c", "1", "1Gi").Obj()
	tenant := testpod.New("q").Namespace("tenant-a").Container("c", "100m", "100Mi").Running().Obj()
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj(), tenant},
		[]*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi"), other, jobVPA("250m", "200Mi")},
		fixtureOpts{jobs: []*batchv1.Job{trainJob().Suspended().Obj()}})
	web, train := f.getVPA("web"), f.getVPA("train")
	tests := []struct {
		name  string
		owner records.Owner
		uid   string
		want  bool
	}{
		{"the VPA's own pod", records.Owner{Namespace: "default", Name: "web", UID: web.UID}, "uid-p", true},
		{"another VPA of the namespace: told at the pod's sync", records.Owner{Namespace: "default", Name: "db", UID: other.UID}, "uid-p", true},
		{"a VPA of another namespace", records.Owner{Namespace: "tenant-a", Name: "web", UID: web.UID}, "uid-p", false},
		{"a pod of the namespace", records.Owner{Namespace: "tenant-a", Name: "web"}, "uid-q", true},
		{"the VPA's own Job", records.Owner{Namespace: "default", Name: "train", UID: train.UID}, "uid-train", true},
		{"a Job of another namespace", records.Owner{Namespace: "tenant-a", Name: "train"}, "uid-train", false},
		{"a UID no pod or Job has", records.Owner{Namespace: "default", Name: "web", UID: web.UID}, "uid-gone", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, f.ctrl.RecordLive(tt.owner, types.UID(tt.uid)))
		})
	}
}
