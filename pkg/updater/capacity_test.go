package updater

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clienttesting "k8s.io/client-go/testing"

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

// brokersFixture: two brokers of a StrimziPodSet on node-1 (4 cpus), 500m
// each, beside a filler of 1500m: 1500m are free. A resize of one broker
// to 1500m fits; of both, it does not.
func brokersFixture(t *testing.T, o fixtureOpts) *fixture {
	var pods []*corev1.Pod
	for i := range 2 {
		b := testpod.New(fmt.Sprintf("kafka-%d", i)).Container("c", "500m", "1Gi").OwnedBy("core.strimzi.io/v1", "StrimziPodSet", "kafka").Running().Obj()
		pods = append(pods, b)
	}
	pods = append(pods, testpod.New("filler").Labels(map[string]string{"app": "filler"}).Container("c", "1500m", "1Gi").Running().Obj())
	o.nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("4", "16Gi")}}}
	return newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("1500m", "1Gi")}, o)
}

// TestConcurrentWorkersNeverOverfillANode: the node check and the resize
// it allows are one step. Many workers decide on both brokers at once,
// resize patches take a while to answer (the cache does not show the first
// when the second is decided): one broker is sent its resize, the other
// waits for room, and never shows Deferred.
func TestConcurrentWorkersNeverOverfillANode(t *testing.T) {
	f := brokersFixture(t, fixtureOpts{})
	f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "resize" {
			time.Sleep(20 * time.Millisecond)
		}
		return false, nil, nil
	})
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			<-start
			assert.NoError(t, f.sync(fmt.Sprintf("kafka-%d", w%2)))
		})
	}
	close(start)
	wg.Wait()
	sent := sets.New(f.resizedPods()...)
	require.Equal(t, 1, sent.Len(), "brokers sent a resize: %v", sets.List(sent))

	// Once the cache shows the resize sent, the pod's own requests count
	// it: the other broker still waits.
	resized := sets.List(sent)[0]
	require.Eventually(t, func() bool {
		p, err := f.ctrl.pods.Pods("default").Get(resized)
		return err == nil && p.Spec.Containers[0].Resources.Requests.Cpu().String() == "1500m"
	}, waitFor, every)
	other := "kafka-0"
	if resized == other {
		other = "kafka-1"
	}
	require.NoError(t, f.sync(other))
	assert.Equal(t, []string{resized}, sets.List(sets.New(f.resizedPods()...)), "%s waits for room", other)
	assert.Zero(t, f.ctrl.room.Len(), "the hold of the resize sent ends once the cache shows it")
}

// TestFitsNodeCountsThePodsOfEveryNamespace: serving one namespace
// (--vpa-object-namespace), the updater still counts every pod bound to
// the node: a DaemonSet's pod in kube-system takes room too.
func TestFitsNodeCountsThePodsOfEveryNamespace(t *testing.T) {
	broker := testpod.New("kafka-0").Container("c", "1", "1Gi").OwnedBy("core.strimzi.io/v1", "StrimziPodSet", "kafka").Running().Obj()
	daemon := testpod.New("node-agent").Namespace("kube-system").Labels(map[string]string{"app": "agent"}).
		Container("c", "2500m", "1Gi").OwnedBy("apps/v1", "DaemonSet", "agent").Running().Obj()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("4", "16Gi")}}
	f := newFixture(t, []*corev1.Pod{broker, daemon}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "1Gi")},
		fixtureOpts{nodes: []*corev1.Node{node}, podNamespace: "default"})
	require.NoError(t, f.sync("kafka-0"))
	assert.Empty(t, f.resizePatches(), "kube-system's pod holds 2500m of the node: 1500m are free besides the broker")
	assert.Equal(t, []string{"Pod/kafka-0 Normal " + report.EventResizeWaitingForNodeCapacity +
		" Resize not sent: the resize to c: requests cpu=2 memory=1Gi does not fit the node now: node node-1 has 1500m cpu free of 4 allocatable; the pod would request 2;" +
		" it is sent once the node has room (vpa-inplace.dev/resize-when: fits-node on the VPA)"}, f.events())

	// The DaemonSet's pod goes: the broker is looked at again at once.
	f.queued()
	require.NoError(t, f.kube.CoreV1().Pods("kube-system").Delete(f.ctx, "node-agent", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return contains(f.queued(), "default/kafka-0") }, waitFor, every)
	require.NoError(t, f.sync("kafka-0"))
	assert.Len(t, f.resizePatches(), 1)
}

// TestHoldOfNodeRoomEndsWhenTheCacheShowsTheResize: a resize sent to a pod
// that no fits-node check reads (a Deployment's) holds its room until the
// cache the ledger reads shows it, and not until the next check of its
// node or the next resync: a burst of 1,000 resizes keeps no room held
// once they are applied. Both caches: the pods' own, and the pods bound to
// nodes watched cluster-wide for an updater serving one namespace.
func TestHoldOfNodeRoomEndsWhenTheCacheShowsTheResize(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("4", "16Gi")}}
	for name, o := range map[string]fixtureOpts{
		"the pods' own cache":          {nodes: []*corev1.Node{node}},
		"the cache of the node's pods": {nodes: []*corev1.Node{node}, podNamespace: "default"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "1Gi")}, o)
			require.NoError(t, f.sync("p"))
			require.Len(t, f.resizePatches(), 1)
			require.Eventually(t, func() bool { return f.ctrl.room.Len() == 0 }, waitFor, every,
				"the hold ends with the cache's update, without another sync")
		})
	}
}
