package updater

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// A broker of a StrimziPodSet, on a node with 4 cpus of which a filler
// holds 2500m: a resize to 2 cpus does not fit.
func strimziFixture(t *testing.T, annotation string) *fixture {
	broker := testpod.New("kafka-0").Container("c", "1", "1Gi").OwnedBy("core.strimzi.io/v1", "StrimziPodSet", "kafka").Running().Obj()
	broker.Labels = map[string]string{"app": "web"}
	filler := testpod.New("filler").Labels(map[string]string{"app": "filler"}).Container("c", "2500m", "1Gi").Running().Obj()
	vpa := inPlaceVPA("2", "1Gi")
	if annotation != "" {
		vpa.Annotations = map[string]string{ResizeWhenAnnotation: annotation}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("4", "16Gi")}}
	return newFixture(t, []*corev1.Pod{broker, filler}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{nodes: []*corev1.Node{node}})
}

func TestStrimziPodsAreSentOnlyWhatFitsTheNode(t *testing.T) {
	f := strimziFixture(t, "")
	require.NoError(t, f.sync("kafka-0"))
	assert.Empty(t, f.resizePatches(), "a resize the node cannot take now is not sent: Strimzi would restart a Deferred broker")
	assert.Equal(t, []string{"Pod/kafka-0 Normal " + report.EventResizeWaitingForNodeCapacity +
		" Resize not sent: the resize to c: requests cpu=2 memory=1Gi does not fit the node now: node node-1 has 1500m cpu free of 4 allocatable; the pod would request 2;" +
		" it is sent once the node has room (vpa-inplace.dev/resize-when: fits-node on the VPA)"}, f.events())
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonWaitingForNodeCapacity, c.Reason)
	assert.Contains(t, c.Message, "1 waiting for node capacity")

	// The filler goes: the broker is looked at again at once.
	f.queued()
	require.NoError(t, f.kube.CoreV1().Pods("default").Delete(f.ctx, "filler", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		for _, k := range f.queued() {
			if k == "default/kafka-0" {
				return true
			}
		}
		return false
	}, waitFor, every, "the waiting broker is queued when a pod of its node goes")
	require.NoError(t, f.sync("kafka-0"))
	assert.Len(t, f.resizePatches(), 1)
}

func TestResizeWhenAnnotation(t *testing.T) {
	t.Run("always: sent, the kubelet may defer it", func(t *testing.T) {
		f := strimziFixture(t, ResizeWhenAlways)
		require.NoError(t, f.sync("kafka-0"))
		assert.Len(t, f.resizePatches(), 1)
	})
	t.Run("fits-node on other pods", func(t *testing.T) {
		filler := testpod.New("filler").Labels(map[string]string{"app": "filler"}).Container("c", "3500m", "1Gi").Running().Obj()
		vpa := inPlaceVPA("2", "1Gi")
		vpa.Annotations = map[string]string{ResizeWhenAnnotation: ResizeWhenFitsNode}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("4", "16Gi")}}
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj(), filler}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{nodes: []*corev1.Node{node}})
		require.NoError(t, f.sync("p"))
		assert.Empty(t, f.resizePatches())
	})
	t.Run("no annotation: other pods are sent their resize", func(t *testing.T) {
		filler := testpod.New("filler").Labels(map[string]string{"app": "filler"}).Container("c", "3500m", "1Gi").Running().Obj()
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("4", "16Gi")}}
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj(), filler}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "1Gi")}, fixtureOpts{nodes: []*corev1.Node{node}})
		require.NoError(t, f.sync("p"))
		assert.Len(t, f.resizePatches(), 1)
	})
}
