package updater

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

func TestInfeasibleAndInvalidAreReportedOnThePodAndItsVPA(t *testing.T) {
	tests := []struct {
		name     string
		pod      *corev1.Pod
		vpa      *vpatypes.VerticalPodAutoscaler
		patchErr error
		reason   string
		contains string
	}{
		{"NodeCapacity refusal", webPod("p").Running().Obj(), inPlaceVPA("8", "100Mi"), nodeCapacityErr(), report.EventResizeInfeasible, "allocatable"},
		{"kubelet Infeasible", testpod.New("p").Container("c", "4", "100Mi").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().
			Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "static CPU manager").Obj(), inPlaceVPA("4", "100Mi"), nil, report.EventResizeInfeasible, "static CPU manager"},
		{"invalid, known before patching", testpod.New("p").Container("c", "", "").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().Obj(),
			inPlaceVPA("300m", "100Mi"), nil, report.EventResizeInvalid, "QoS class"},
		{"invalid, refused by the API server", webPod("p").Running().Obj(), inPlaceVPA("300m", "300Mi"),
			apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Forbidden(field.NewPath("spec"), "resize is not supported")}),
			report.EventResizeInvalid, "resize is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{tc.pod}, []*vpatypes.VerticalPodAutoscaler{tc.vpa}, fixtureOpts{})
			if tc.patchErr != nil {
				f.failResize(tc.patchErr)
			}
			require.NoError(t, f.sync("p"))
			pod := f.events()
			require.Len(t, pod, 1)
			assert.Contains(t, pod[0], "Pod/p Warning "+tc.reason)
			assert.Contains(t, pod[0], tc.contains)
			vpa := f.vpaEvents()
			require.Len(t, vpa, 1)
			assert.Contains(t, vpa[0], "VerticalPodAutoscaler/web Warning "+tc.reason+" Pod p: ")
			assert.Contains(t, vpa[0], tc.contains)

			require.NoError(t, f.sync("p"))
			assert.Empty(t, f.events(), "reported once")
			assert.Empty(t, f.vpaEvents(), "reported once")
		})
	}
}

func TestLongDeferredWaitIsWarnedOnce(t *testing.T) {
	const after = 10 * time.Minute
	deferredSince := t0.Add(-4 * time.Minute)
	pod := webPod("p").Running().ConditionSince(corev1.PodResizePending, corev1.PodReasonDeferred,
		"Node didn't have enough resource: cpu", deferredSince).Obj()
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "100Mi")}, fixtureOpts{deferredWarningAfter: after})

	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.events())
	assert.Empty(t, f.vpaEvents())
	due, ok := f.podQueue.of("default/p")
	require.True(t, ok, "the pod is looked at again when the warning is due")
	assert.Equal(t, 6*time.Minute, due, "counted from the condition's lastTransitionTime")

	f.clock.Step(6 * time.Minute)
	require.NoError(t, f.sync("p"))
	pods := f.events()
	require.Len(t, pods, 1)
	assert.Contains(t, pods[0], "Pod/p Warning "+report.EventResizeDeferredTooLong+" Resize deferred by the kubelet for 10m0s (since 2027-01-15T07:56:00Z): Node didn't have enough resource: cpu; still waiting, the pod is not evicted")
	vpas := f.vpaEvents()
	require.Len(t, vpas, 1)
	assert.Contains(t, vpas[0], "VerticalPodAutoscaler/web Warning "+report.EventResizeDeferredTooLong+" Pod p: resize deferred")

	f.clock.Step(time.Hour)
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.events(), "once per Deferred episode")
	assert.Empty(t, f.vpaEvents())
	assert.Empty(t, f.writes(), "the pod keeps waiting: no patch, no eviction")
}

func TestLongDeferredWaitWithoutConditionTime(t *testing.T) {
	// The legacy status.resize field has no time: the wait counts from when
	// the updater first saw the pod deferred.
	pod := webPod("p").Running().LegacyResizeStatus(corev1.PodResizeStatusDeferred).Obj()
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "100Mi")}, fixtureOpts{deferredWarningAfter: time.Minute})
	require.NoError(t, f.sync("p"))
	due, ok := f.podQueue.of("default/p")
	require.True(t, ok)
	assert.Equal(t, time.Minute, due)
	f.clock.Step(30 * time.Second)
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.events(), "the first sighting stays the start")
	f.clock.Step(30 * time.Second)
	require.NoError(t, f.sync("p"))
	require.Len(t, f.events(), 1)
}

func TestLongDeferredWarningCanBeTurnedOff(t *testing.T) {
	pod := webPod("p").Running().ConditionSince(corev1.PodResizePending, corev1.PodReasonDeferred, "no room", t0.Add(-time.Hour)).Obj()
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "100Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.events())
	_, ok := f.podQueue.of("default/p")
	assert.False(t, ok)
}

func TestDryRunDecidesAndReportsWithoutPatching(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj(), testpod.New("q").Container("c", "", "").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().Obj()},
		[]*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{dryRun: true})
	for range 3 {
		require.NoError(t, f.sync("p"))
		require.NoError(t, f.sync("q"))
	}
	assert.Empty(t, f.writes(), "no resize is sent")
	events := f.events()
	require.Len(t, events, 2, "one withheld event per pod and target, one invalid event: %v", events)
	assert.Contains(t, events[0], "Pod/p Normal "+report.EventResizeWithheld+" Would resize in place to c: requests cpu=300m memory=300Mi; not sent: the updater runs with --dry-run")
	assert.Contains(t, events[1], "Pod/q Warning "+report.EventResizeInvalid)
	assert.InDelta(t, 3, counter(t, f, report.MetricResizesWithheld, "reason", withheldDryRun), 0)
	assert.InDelta(t, 3, counter(t, f, report.MetricDecisions, "action", "Patch", "reason", "Resize"), 0)
	assert.InDelta(t, 0, counter(t, f, report.MetricResizesSent), 0)
	assert.InDelta(t, 1, gauge(t, f, report.MetricDryRun, nil), 0)
	assert.InDelta(t, 1, gauge(t, f, report.MetricPodsPending, map[string]string{"state": "Withheld"}), 0)

	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonDryRun, c.Reason)
	assert.Contains(t, c.Message, "p would be resized to c: requests cpu=300m memory=300Mi")
	assert.Contains(t, c.Message, "Invalid: q cannot be resized in place")

	t.Run("a new target is reported again", func(t *testing.T) {
		v := f.getVPA("web")
		v.Status.Recommendation = inPlaceVPA("400m", "300Mi").Status.Recommendation
		_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
		require.NoError(t, err)
		f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool {
			return v.Status.Recommendation.ContainerRecommendations[0].Target.Cpu().String() == "400m"
		})
		require.NoError(t, f.sync("p"))
		events := f.events()
		require.Len(t, events, 1)
		assert.Contains(t, events[0], "cpu=400m")
		assert.Empty(t, f.writes())
	})
}

func TestPauseAnnotation(t *testing.T) {
	tests := []struct {
		value   string
		patched bool
	}{
		{"true", false},
		{"True", false},
		{"yes", false}, // not a boolean: treated as paused
		{"false", true},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			vpa := inPlaceVPA("300m", "300Mi")
			vpa.Annotations = map[string]string{PausedAnnotation: tc.value}
			f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
			require.NoError(t, f.sync("p"))
			if tc.patched {
				assert.Len(t, f.resizePatches(), 1)
				return
			}
			assert.Empty(t, f.resizePatches())
			assert.InDelta(t, 1, counter(t, f, report.MetricResizesWithheld, "reason", withheldVPAPaused), 0)
			events := f.events()
			require.Len(t, events, 1)
			assert.Contains(t, events[0], "not sent: resizing is paused by annotation vpa-inplace.dev/paused")
		})
	}

	t.Run("removing the annotation resumes at once", func(t *testing.T) {
		vpa := inPlaceVPA("300m", "300Mi")
		vpa.Annotations = map[string]string{PausedAnnotation: "true"}
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
		f.run()
		require.Eventually(t, func() bool {
			return counter(t, f, report.MetricResizesWithheld, "reason", withheldVPAPaused) >= 1
		}, waitFor, 20*time.Millisecond)
		assert.Empty(t, f.resizePatches())

		v := f.getVPA("web")
		delete(v.Annotations, PausedAnnotation)
		_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(context.Background(), v, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Eventually(t, func() bool { return len(f.resizePatches()) == 1 }, waitFor, 20*time.Millisecond,
			"the annotation change alone queues the pods, long before the resync interval")
	})
}

func TestClusterKillSwitch(t *testing.T) {
	configMap := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "vpa-inplace-updater-config"}, Data: data}
	}
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		patched bool
	}{
		{"no ConfigMap: not paused", nil, true},
		{"no paused key: not paused", configMap(map[string]string{"other": "x"}), true},
		{"paused: true", configMap(map[string]string{PausedKey: "true"}), false},
		{"paused: not a boolean, treated as paused", configMap(map[string]string{PausedKey: "please"}), false},
		{"paused: false", configMap(map[string]string{PausedKey: "false"}), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{watchConfigMap: true})
			if tc.cm != nil {
				_, err := f.kube.CoreV1().ConfigMaps(systemNamespace).Create(context.Background(), tc.cm, metav1.CreateOptions{})
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					_, exists, err := f.ctrl.configMaps.GetByKey(systemNamespace + "/" + tc.cm.Name)
					return err == nil && exists
				}, waitFor, 10*time.Millisecond)
			}
			require.NoError(t, f.sync("p"))
			if tc.patched {
				assert.Len(t, f.resizePatches(), 1)
				assert.InDelta(t, 0, gauge(t, f, report.MetricPaused, nil), 0)
				return
			}
			assert.Empty(t, f.resizePatches())
			assert.InDelta(t, 1, counter(t, f, report.MetricResizesWithheld, "reason", withheldClusterPaused), 0)
			assert.InDelta(t, 1, gauge(t, f, report.MetricPaused, nil), 0)
			require.NoError(t, f.syncStatus("web"))
			c := f.condition("web")
			require.NotNil(t, c)
			assert.Equal(t, condition.ReasonPaused, c.Reason)
			assert.Contains(t, c.Message, "cluster-wide by ConfigMap vpa-inplace-system/vpa-inplace-updater-config")
		})
	}

	t.Run("flipping the switch off resumes at once", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{watchConfigMap: true})
		_, err := f.kube.CoreV1().ConfigMaps(systemNamespace).Create(context.Background(), configMap(map[string]string{PausedKey: "true"}), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { paused, _ := f.ctrl.clusterPaused(); return paused }, waitFor, 10*time.Millisecond)
		f.run()
		require.Eventually(t, func() bool {
			return counter(t, f, report.MetricResizesWithheld, "reason", withheldClusterPaused) >= 1
		}, waitFor, 20*time.Millisecond)

		_, err = f.kube.CoreV1().ConfigMaps(systemNamespace).Update(context.Background(), configMap(map[string]string{PausedKey: "false"}), metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Eventually(t, func() bool { return len(f.resizePatches()) == 1 }, waitFor, 20*time.Millisecond)
	})

	// Every decision reads the switch; its absence, the default, costs no
	// allocation (a lister would build a NotFound error each time).
	t.Run("no ConfigMap is read without allocating", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{watchConfigMap: true})
		paused := 0
		allocs := testing.AllocsPerRun(100, func() {
			if on, _ := f.ctrl.clusterPaused(); on {
				paused++
			}
		})
		assert.Zero(t, allocs)
		assert.Zero(t, paused)
	})
}
