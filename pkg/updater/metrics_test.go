package updater

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// counter reads a counter of the fixture's registry, its labels given as
// name, value pairs; 0 when the series does not exist yet.
func counter(t *testing.T, f *fixture, name string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	families, err := f.registry.Gather()
	require.NoError(t, err)
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	series:
		for _, m := range fam.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// gauge returns the value of the series of name whose labels include want.
func gauge(t *testing.T, f *fixture, name string, want map[string]string) float64 {
	t.Helper()
	families, err := f.registry.Gather()
	require.NoError(t, err)
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	series:
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

func TestResizeOutcomeMetrics(t *testing.T) {
	t.Run("a sent resize that the kubelet applies is completed", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
		require.NoError(t, f.sync("p"))
		assert.InDelta(t, 1, counter(t, f, report.MetricResizesSent), 0)
		assert.InDelta(t, 1, gauge(t, f, report.MetricPodsPending, map[string]string{"state": "InProgress"}), 0)
		// The fake API applies the patch to the spec; status says nothing
		// is pending: the resize is done.
		require.Eventually(t, func() bool {
			p, err := f.ctrl.pods.Pods("default").Get("p")
			return err == nil && p.Spec.Containers[0].Resources.Requests.Cpu().String() == "300m"
		}, waitFor, 10*time.Millisecond)
		require.NoError(t, f.sync("p"))
		assert.InDelta(t, 1, counter(t, f, report.MetricResizesCompleted), 0)
		assert.InDelta(t, 0, gauge(t, f, report.MetricPodsPending, map[string]string{"state": "InProgress"}), 0)
		require.NoError(t, f.sync("p"))
		assert.InDelta(t, 1, counter(t, f, report.MetricResizesCompleted), 0, "counted once")
	})

	t.Run("a sent resize that the kubelet finds infeasible is a failure", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("3", "300Mi")}, fixtureOpts{})
		require.NoError(t, f.sync("p"))
		p, err := f.kube.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
		require.NoError(t, err)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible, Message: "Node didn't have enough capacity"})
		_, err = f.kube.CoreV1().Pods("default").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			p, err := f.ctrl.pods.Pods("default").Get("p")
			return err == nil && len(p.Status.Conditions) == 2
		}, waitFor, 10*time.Millisecond)
		require.NoError(t, f.sync("p"))
		assert.InDelta(t, 1, counter(t, f, report.MetricResizeFailures, "reason", "KubeletInfeasible"), 0)
		assert.InDelta(t, 0, counter(t, f, report.MetricResizesCompleted), 0)
		assert.InDelta(t, 1, gauge(t, f, report.MetricInfeasibleRecords, nil), 0)
	})
}

func TestPendingGauges(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{
		webPod("old").Running().ConditionSince(corev1.PodResizePending, corev1.PodReasonDeferred, "no room", t0.Add(-time.Hour)).Obj(),
		webPod("new").Running().ConditionSince(corev1.PodResizePending, corev1.PodReasonDeferred, "no room", t0.Add(-time.Minute)).Obj(),
		webPod("busy").Running().ConditionSince(corev1.PodResizeInProgress, "", "", t0.Add(-2*time.Minute)).Obj(),
		testpod.New("done").Container("c", "2", "100Mi").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().Obj(),
	}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "100Mi")}, fixtureOpts{})
	for _, p := range []string{"old", "new", "busy", "done"} {
		require.NoError(t, f.sync(p))
	}
	f.clock.Step(time.Minute)
	tests := []struct {
		state   string
		pending float64
		oldest  float64
	}{
		{"Deferred", 2, 61 * 60},
		{"InProgress", 1, 3 * 60},
		{"Error", 0, 0},
		{"DisruptionBudget", 0, 0},
		{"Withheld", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.state, func(t *testing.T) {
			assert.InDelta(t, tc.pending, gauge(t, f, report.MetricPodsPending, map[string]string{"state": tc.state}), 0)
			assert.InDelta(t, tc.oldest, gauge(t, f, report.MetricOldestPending, map[string]string{"state": tc.state}), 0)
		})
	}

	t.Run("a deleted pod no longer counts", func(t *testing.T) {
		require.NoError(t, f.kube.CoreV1().Pods("default").Delete(context.Background(), "old", metav1.DeleteOptions{}))
		require.Eventually(t, func() bool {
			return gauge(t, f, report.MetricPodsPending, map[string]string{"state": "Deferred"}) == 1
		}, waitFor, 10*time.Millisecond)
		assert.InDelta(t, 2*60, gauge(t, f, report.MetricOldestPending, map[string]string{"state": "Deferred"}), 0)
	})
}

func TestLatencyHistograms(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{})
	require.Eventually(t, func() bool {
		f.ctrl.mu.Lock()
		defer f.ctrl.mu.Unlock()
		return f.ctrl.recommendationSeen["uid-web"].Equal(t0)
	}, waitFor, 10*time.Millisecond, "the recommendation is seen with the VPA, at t0")
	f.clock.Step(2500 * time.Millisecond)
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)

	n, err := testutil.GatherAndCount(f.registry, report.MetricRecommendationLag)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	families, err := f.registry.Gather()
	require.NoError(t, err)
	for _, fam := range families {
		switch fam.GetName() {
		case report.MetricRecommendationLag:
			h := fam.GetMetric()[0].GetHistogram()
			assert.Equal(t, uint64(1), h.GetSampleCount())
			assert.InDelta(t, 2.5, h.GetSampleSum(), 1e-9, "from the recommendation change seen to the accepted patch")
		case report.MetricDecisionDuration:
			assert.Equal(t, uint64(1), fam.GetMetric()[0].GetHistogram().GetSampleCount(), "one decision")
		}
	}
}

// The recommendation's time is when the updater saw it change, not when the
// VPA object last changed (our own condition writes, annotations).
func TestRecommendationChangeTime(t *testing.T) {
	f := newFixture(t, nil, nil, fixtureOpts{})
	seen := func() time.Time {
		f.ctrl.mu.Lock()
		defer f.ctrl.mu.Unlock()
		return f.ctrl.recommendationSeen["uid-web"]
	}
	first := inPlaceVPA("100m", "100Mi")
	f.ctrl.onVPA(nil, first)
	assert.Equal(t, t0, seen(), "first seen")

	f.clock.Step(time.Minute)
	withCondition := first.DeepCopy()
	withCondition.Status.Conditions = []vpatypes.VerticalPodAutoscalerCondition{{Type: condition.Type, Status: corev1.ConditionFalse}}
	withCondition.Annotations = map[string]string{"vpa-inplace.dev/infeasible-attempts": "{}"}
	f.ctrl.onVPA(first, withCondition)
	assert.Equal(t, t0, seen(), "same recommendation: unchanged")

	f.clock.Step(time.Minute)
	f.ctrl.onVPA(withCondition, inPlaceVPA("200m", "100Mi"))
	assert.Equal(t, t0.Add(2*time.Minute), seen(), "new recommendation")
}
