package updater

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// preemptionFixture: pod web-0 of an InPlace VPA, priority 1000, on node-1,
// resized to 2 cpus, which the kubelet holds Deferred; pod batch/filler,
// priority victimPriority, on the same node.
func preemptionFixture(t *testing.T, victimPriority int32, o fixtureOpts) *fixture {
	t.Helper()
	web := webPod("web-0").Running().Obj()
	web.Labels = map[string]string{"app": "web"}
	web.Spec.Priority = ptr.To[int32](1000)
	filler := testpod.New("filler").Namespace("batch").Labels(map[string]string{"app": "filler"}).Container("c", "3", "1Gi").Running().Obj()
	filler.Spec.Priority = ptr.To(victimPriority)
	f := newFixture(t, []*corev1.Pod{web, filler}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "100Mi")}, o)
	require.NoError(t, f.sync("web-0"))
	require.Len(t, f.resizePatches(), 1)
	f.waitCachedCPU("web-0", "2")
	f.kubeletOn("web-0", pending(corev1.PodReasonDeferred, "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 3500"))
	require.NoError(t, f.sync("web-0"))
	f.waitState("web-0", state.PodDeferred)
	f.events()
	f.vpaEvents()
	f.queued()
	return f
}

// waitCachedCPU waits until the cached pod's cpu request is cpu.
func (f *fixture) waitCachedCPU(name, cpu string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		c, err := f.ctrl.pods.Pods("default").Get(name)
		return err == nil && c.Spec.Containers[0].Resources.Requests.Cpu().String() == cpu
	}, waitFor, every)
}

// preempt marks batch/filler as the scheduler marks a victim before it
// deletes it.
func (f *fixture) preempt() {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("batch").Get(f.ctx, "filler", metav1.GetOptions{})
	require.NoError(f.t, err)
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler, Message: "default-scheduler: preempting to accommodate a higher priority pod",
		LastTransitionTime: metav1.NewTime(t0)})
	_, err = f.kube.CoreV1().Pods("batch").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

func TestResizePreemptionIsReportedAndNotOurs(t *testing.T) {
	for name, o := range map[string]fixtureOpts{
		"one cache of every pod": {},
		// Victims of other namespaces come from the cluster-wide node view.
		"serving one namespace": {podNamespace: "default", nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Status: corev1.NodeStatus{Allocatable: testpod.List("3500m", "16Gi")}}}},
	} {
		t.Run(name, func(t *testing.T) {
			f := preemptionFixture(t, 0, o)
			f.preempt()
			require.Eventually(t, func() bool { return counter(t, f, report.MetricResizePreemptions) == 1 }, waitFor, every,
				"the victim is seen and attributed")
			assert.Contains(t, f.queued(), "default/web-0", "the pod it may be for is looked at")

			require.NoError(t, f.sync("web-0"))
			assert.Equal(t, []string{"Pod/web-0 Normal " + report.EventResizePreemption +
				" The scheduler preempted pod batch/filler (priority 0) on node node-1, which may make room for this pod's Deferred resize (priority 1000; resize preemption, KEP-5836);" +
				" the updater evicted nothing and does not count it as one of its disruptions"}, f.events())
			vpaEvents := f.vpaEvents()
			require.Len(t, vpaEvents, 1)
			assert.Contains(t, vpaEvents[0], report.EventResizePreemption+" Pod web-0: the scheduler preempted pod batch/filler (priority 0) on node node-1")
			require.NoError(t, f.syncStatus("web"))
			c := f.condition("web")
			require.NotNil(t, c)
			assert.Equal(t, condition.ReasonDeferred, c.Reason)
			assert.Contains(t, c.Message, "Resize preemption (the scheduler's, not a disruption by the updater): batch/filler (priority 0) on node-1 is being preempted since 2027-01-15T08:00:00Z, which may make room for the Deferred resize of web-0.")

			// Reported once, however often the pod is looked at.
			require.NoError(t, f.sync("web-0"))
			assert.Empty(t, f.events())
			assert.InDelta(t, 1, counter(t, f, report.MetricResizePreemptions), 0)
			// Not ours: no place under the eviction tolerance or a PDB.
			assert.Empty(t, f.ctrl.budget.Reserved())

			// The victim goes; the resize is still Deferred.
			f.clock.Step(3 * time.Second)
			require.NoError(t, f.kube.CoreV1().Pods("batch").Delete(f.ctx, "filler", metav1.DeleteOptions{}))
			require.Eventually(t, func() bool {
				return len(f.ctrl.preempted.Of("default/web")) == 1 && !f.ctrl.preempted.Of("default/web")[0].Victims[0].Gone.IsZero()
			}, waitFor, every)
			require.NoError(t, f.syncStatus("web"))
			assert.Contains(t, f.condition("web").Message, "batch/filler (priority 0) on node-1 was preempted at 2027-01-15T08:00:00Z, which may have made room for the Deferred resize of web-0, still Deferred.")
			assert.Empty(t, f.ctrl.budget.Reserved())
			assert.NotContains(t, strings.Join(f.writes(), " "), "eviction", "the updater evicts nothing")
		})
	}
}

// The scheduler never preempts a pod of equal or higher priority: such a
// pod, preempted for something else, is not attributed to the resize.
func TestPreemptionOfAnEqualPriorityPodIsNotAttributed(t *testing.T) {
	f := preemptionFixture(t, 1000, fixtureOpts{})
	f.preempt()
	require.Eventually(t, func() bool {
		p, err := f.ctrl.podIdx.ByIndex(nodeIndex, "node-1")
		if err != nil {
			return false
		}
		for _, o := range p {
			if pod := o.(*corev1.Pod); pod.Name == "filler" && len(pod.Status.Conditions) > 1 {
				return true
			}
		}
		return false
	}, waitFor, every, "the victim's condition reached the cache")
	f.podHandlersCaughtUp()
	require.NoError(t, f.sync("web-0"))
	assert.Empty(t, f.events())
	assert.Zero(t, counter(t, f, report.MetricResizePreemptions))
	require.NoError(t, f.syncStatus("web"))
	assert.NotContains(t, f.condition("web").Message, "preempt")
}

// A resize sent only when it fits its node (resize-when: fits-node, the
// default for Strimzi's brokers) is never Deferred by the updater: the
// scheduler has nothing to preempt for, and a preemption on its node is not
// attributed to it.
func TestFitsNodePodsCauseNoPreemption(t *testing.T) {
	f := strimziFixture(t, "")
	require.NoError(t, f.sync("kafka-0"))
	require.Empty(t, f.resizePatches(), "not sent: it does not fit")
	f.waitState("kafka-0", state.PodWaitingForNode)
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, "filler", metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler})
	_, err = f.kube.CoreV1().Pods("default").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.podHandlersCaughtUp()
	assert.Zero(t, counter(t, f, report.MetricResizePreemptions))
}

var caughtUp atomic.Int32

// podHandlersCaughtUp waits until the pod handler has handled every pod
// event before the call: it handles them in order, and queues a pod created
// now. It drains the pod queue. (The handler of the pods bound to nodes
// observes preemptions too, on the same pods, and decides alike.)
func (f *fixture) podHandlersCaughtUp() {
	f.t.Helper()
	f.queued()
	marker := testpod.New(fmt.Sprint("caught-up-", caughtUp.Add(1))).Obj()
	_, err := f.kube.CoreV1().Pods(marker.Namespace).Create(f.ctx, marker, metav1.CreateOptions{})
	require.NoError(f.t, err)
	key := marker.Namespace + "/" + marker.Name
	require.Eventually(f.t, func() bool { return slices.Contains(f.queued(), key) }, waitFor, every, "the pod handler caught up")
}
