//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// Resize preemption (KEP-5836, alpha in Kubernetes 1.37, docs/deferred.md):
// with InPlacePodVerticalScalingSchedulerPreemption on the API server, the
// scheduler and the kubelets (the v1.37-preemption profile of hack/e2e.sh),
// the scheduler preempts a pod of lower priority on the node of a Deferred
// resize so that the resize fits. Off (every other profile), the resize
// stays Deferred and nothing is preempted.

const (
	schedulerPreemptionGate = "InPlacePodVerticalScalingSchedulerPreemption"
	eventResizePreemption   = "InPlaceResizePreemption"
	metricResizePreemptions = "vpa_inplace_updater_resize_preemptions_total"
)

// A pod of priority 1000 whose resize does not fit its node beside a pod of
// priority 0. Gate on: the scheduler preempts the other pod, the kubelet
// applies the resize (one patch: the updater sends nothing more), and the
// updater says so on the pod and the VPA, counts the victim once, and
// disrupts nothing of the workload. Gate off: the resize stays Deferred and
// the other pod keeps running.
func TestResizePreemptionMadeVisible(t *testing.T) {
	on := apiServerFeatureEnabled(t, schedulerPreemptionGate)
	t.Logf("%s on the API server: %v", schedulerPreemptionGate, on)
	high := priorityClass(t, 1000)
	ns := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	pods := deploy(t, ns, workload{name: "web", node: node, priorityClass: high, requests: rl("200m", "100Mi")})
	require.NotNil(t, pods[0].Spec.Priority)
	require.EqualValues(t, 1000, *pods[0].Spec.Priority)
	before := snap(pods)
	victim := fillLeaving(t, ns, node, "500m")
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	g0 := pods[0].Generation
	counted := updaterMetric(t, metricResizePreemptions)

	recommend(t, ns, "web", "1", "100Mi")
	if !on {
		waitFor(t, eventually, "resize Deferred", func(context.Context) (bool, error) {
			return strings.Contains(resizeConditions(getPod(t, ns, pods[0].Name)), "Deferred"), nil
		})
		requireStable(t, ns, pods[0].Name)
		v, err := kube.CoreV1().Pods(ns).Get(ctxFor(t), victim, metav1.GetOptions{})
		require.NoError(t, err, "gate off: the pod of lower priority is not preempted")
		assert.Nil(t, v.DeletionTimestamp)
		assert.Equal(t, g0+1, getPod(t, ns, pods[0].Name).Generation, "one patch, then waiting")
		assert.Zero(t, eventCount(t, ns, pods[0].Name, eventResizePreemption))
		assert.Equal(t, counted, updaterMetric(t, metricResizePreemptions))
		requireNotDisrupted(t, ns, "web", before)
		return
	}

	start := time.Now()
	got := waitResized(t, ns, pods[0].Name, "1", "100Mi")
	t.Logf("resized %s after the recommendation", time.Since(start).Round(10*time.Millisecond))
	assert.Equal(t, g0+1, got.Generation, "one patch: the kubelet applied it once the victim was gone")
	waitFor(t, eventually, "the victim preempted and gone", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	assert.Positive(t, eventCount(t, ns, victim, "Preempted"), "the scheduler's event on the victim")

	waitEvent(t, ns, pods[0].Name, eventResizePreemption, 1)
	waitEvent(t, ns, "web", eventResizePreemption, 1) // the VPA's
	for _, e := range events(t, ns, pods[0].Name, eventResizePreemption) {
		t.Logf("event on the pod: %s", e.Message)
		assert.Contains(t, e.Message, victim)
	}
	waitFor(t, eventually, "the victim counted once", func(context.Context) (bool, error) {
		return updaterMetric(t, metricResizePreemptions) >= counted+1, nil
	})
	requireStable(t, ns, pods[0].Name)
	assert.Equal(t, counted+1, updaterMetric(t, metricResizePreemptions), "each victim once")
	assert.EqualValues(t, 1, eventCount(t, ns, pods[0].Name, eventResizePreemption), "one event per victim")
	requireNotDisrupted(t, ns, "web", before)
}

// With resize-when: fits-node (the default for Strimzi's brokers), a resize
// the node has no room for is not sent, so it is never Deferred and the
// scheduler preempts nothing for it, whatever the pod's priority. Shown with
// the gate on; with it off nothing could be preempted anyway.
func TestFitsNodeResizeCausesNoPreemption(t *testing.T) {
	if !apiServerFeatureEnabled(t, schedulerPreemptionGate) {
		t.Skipf("needs %s on (the v1.37-preemption profile): with it off the scheduler never preempts for a resize", schedulerPreemptionGate)
	}
	high := priorityClass(t, 1000)
	ns := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	pods := deploy(t, ns, workload{name: "broker", node: node, priorityClass: high, requests: rl("200m", "100Mi")})
	before := snap(pods)
	victim := fillLeaving(t, ns, node, "500m")
	newVPA(t, ns, "broker", vpatypes.UpdateModeInPlace, nil)
	annotateVPA(t, ns, "broker", map[string]string{"vpa-inplace.dev/resize-when": "fits-node"})
	g0 := pods[0].Generation
	counted := updaterMetric(t, metricResizePreemptions)

	recommend(t, ns, "broker", "1", "100Mi")
	waitConditionMessage(t, ns, "broker", "1 waiting for node capacity")
	requireStable(t, ns, pods[0].Name)
	p := getPod(t, ns, pods[0].Name)
	assert.Equal(t, g0, p.Generation, "no resize sent")
	assert.Empty(t, resizeConditions(p), "never Deferred")
	v, err := kube.CoreV1().Pods(ns).Get(ctxFor(t), victim, metav1.GetOptions{})
	require.NoError(t, err, "nothing preempted")
	assert.Nil(t, v.DeletionTimestamp)
	assert.Zero(t, eventCount(t, ns, victim, "Preempted"))
	assert.Equal(t, counted, updaterMetric(t, metricResizePreemptions))
	requireNotDisrupted(t, ns, "broker", before)
}

// priorityClass creates a PriorityClass of the given value for the test and
// returns its name; it is deleted when the test ends.
func priorityClass(t *testing.T, value int32) string {
	t.Helper()
	pc, err := kube.SchedulingV1().PriorityClasses().Create(ctxFor(t), &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{GenerateName: "e2e-resize-"},
		Value:            value,
		PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
		Description:      "e2e: a pod whose Deferred resize may preempt pods of lower priority",
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
	})
	return pc.Name
}
