package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func TestMinReady(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}
	}
	factory := informers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	require.NoError(t, factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(
		&appsv1.ReplicaSet{ObjectMeta: meta("web-abc"), Spec: appsv1.ReplicaSetSpec{MinReadySeconds: 20}}))
	require.NoError(t, factory.Apps().V1().StatefulSets().Informer().GetIndexer().Add(
		&appsv1.StatefulSet{ObjectMeta: meta("kafka"), Spec: appsv1.StatefulSetSpec{MinReadySeconds: 15}}))
	require.NoError(t, factory.Apps().V1().StatefulSets().Informer().GetIndexer().Add(
		&appsv1.StatefulSet{ObjectMeta: meta("zk")}))
	m := MinReady{
		ReplicaSets:  factory.Apps().V1().ReplicaSets().Lister(),
		StatefulSets: factory.Apps().V1().StatefulSets().Lister(),
		DaemonSets:   factory.Apps().V1().DaemonSets().Lister(),
		Default:      30 * time.Second,
	}
	tests := []struct {
		name string
		pod  *testpod.Builder
		want time.Duration
	}{
		{"a Deployment's ReplicaSet", testpod.New("p").OwnedBy("apps/v1", "ReplicaSet", "web-abc"), 20 * time.Second},
		{"a StatefulSet", testpod.New("p").OwnedBy("apps/v1", "StatefulSet", "kafka"), 15 * time.Second},
		{"a StatefulSet without minReadySeconds", testpod.New("p").OwnedBy("apps/v1", "StatefulSet", "zk"), 30 * time.Second},
		{"a controller not in the cache", testpod.New("p").OwnedBy("apps/v1", "DaemonSet", "gone"), 30 * time.Second},
		{"a custom resource", testpod.New("p").OwnedBy("core.strimzi.io/v1", "StrimziPodSet", "kafka"), 30 * time.Second},
		{"no controller", testpod.New("p"), 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, m.For(tt.pod.Obj()))
		})
	}
}
