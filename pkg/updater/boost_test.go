package updater

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/annotations"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// boostVPA recommends cpu for container c, with a Factor 2 startup boost
// of seconds after Ready.
func boostVPA(cpu string, seconds int32) *vpatypes.VerticalPodAutoscaler {
	v := testvpa.New("web").InPlace().Recommend("c", cpu, "100Mi").Obj()
	v.Spec.StartupBoost = &vpatypes.StartupBoost{CPU: &vpatypes.GenericStartupBoost{
		Type: vpatypes.FactorStartupBoostType, Factor: ptr.To(int32(2)), DurationSeconds: ptr.To(seconds)}}
	return v
}

// boostedPod is a pod created with container c boosted from 100m to 200m,
// with upstream's annotation, Ready since readySince (not Ready when zero).
func boostedPod(t *testing.T, name string, readySince time.Time) *corev1.Pod {
	t.Helper()
	created := testpod.New(name).Container("c", "100m", "100Mi").Obj()
	value, err := annotations.GetOriginalResourcesAnnotationValue(&created.Spec.Containers[0])
	require.NoError(t, err)
	pod := webPod(name).Running().Obj()
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = testpod.List("200m", "100Mi")[corev1.ResourceCPU]
	pod = webPodLike(pod)
	pod.Annotations = map[string]string{boost.AnnotationKey("c"): value}
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			pod.Status.Conditions[i].LastTransitionTime = metav1.NewTime(readySince)
			if readySince.IsZero() {
				pod.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	}
	return pod
}

// webPodLike makes the pod's status report its spec as applied.
func webPodLike(pod *corev1.Pod) *corev1.Pod {
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].Resources = pod.Spec.Containers[i].Resources.DeepCopy()
		pod.Status.ContainerStatuses[i].AllocatedResources = pod.Spec.Containers[i].Resources.Requests.DeepCopy()
	}
	return pod
}

// annotationRemovals returns the merge patches sent to pods themselves.
func (f *fixture) annotationRemovals() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "" && p.GetPatchType() == types.MergePatchType {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func TestAStartupBoostEndsInPlaceWhenDue(t *testing.T) {
	pod := boostedPod(t, "p", t0)
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)}, fixtureOpts{boost: true})

	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "boosted: not resized, although the recommendation differs")
	after, ok := f.podQueue.of("default/p")
	require.True(t, ok, "a timer for the boost's end")
	assert.Equal(t, 20*time.Second, after, "Ready + durationSeconds")
	assert.Equal(t, string(state.PodBoosted), f.podState("p"))

	f.clock.Step(19 * time.Second)
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "one second early")

	f.clock.Step(time.Second)
	require.NoError(t, f.sync("p"))
	require.Equal(t, []string{`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"150m","memory":"100Mi"}}}]}}`}, f.resizePatches(),
		"exactly at Ready + durationSeconds, to the recommendation")
	assert.Equal(t, []string{`{"metadata":{"annotations":{"vpaCpuStartupBoost/c":null},"uid":"` + string(pod.UID) + `"}}`}, f.annotationRemovals(),
		"the annotation goes in a second write, guarded by the pod's UID")
	events := f.events()
	assert.Contains(t, events, "Pod/p Normal "+report.EventStartupBoostEnded+
		" CPU startup boost of c ended 1m20s after the pod's creation: resized in place to c: requests cpu=150m memory=100Mi")
	n, err := testutil.GatherAndCount(f.registry, report.MetricBoostDuration)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// The timer runs on the queue's clock: nothing but the clock reaching
// Ready + durationSeconds brings the pod back.
func TestTheBoostTimerFiresOnTheQueuesClock(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{boostedPod(t, "p", t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)}, fixtureOpts{boost: true})
	require.NoError(t, f.sync("p"))
	f.queued() // the pod's own add events

	f.clock.Step(19 * time.Second)
	assert.NotContains(t, f.queued(), "default/p", "not due yet")
	f.stepUntil(time.Second, func() bool { return slices.Contains(f.queued(), "default/p") }, "due on the queue's clock")
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1)
}

func TestABoostedPodIsNotOtherwiseResized(t *testing.T) {
	vpa := boostVPA("150m", 600)
	vpa.Status.Recommendation.ContainerRecommendations[0].Target[corev1.ResourceMemory] = testpod.List("1", "300Mi")[corev1.ResourceMemory]
	f := newFixture(t, []*corev1.Pod{boostedPod(t, "p", t0)}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{boost: true})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "a memory change waits for the boost's end too")
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, "False", string(c.Status), "a boost blocks nothing")
	assert.Equal(t, "1 pod: 1 boosted at startup.", c.Message)
	assert.Equal(t, 1.0, gauge(t, f, report.MetricStartupBoosts, nil))
}

func TestAPodNeverReadyKeepsItsBoost(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{boostedPod(t, "p", time.Time{})}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)}, fixtureOpts{boost: true})
	for range 3 {
		require.NoError(t, f.sync("p"))
		f.clock.Step(time.Hour)
	}
	assert.Empty(t, f.resizePatches())
	assert.Empty(t, f.annotationRemovals())
	assert.Zero(t, f.podQueue.count("default/p"), "no timer: its Ready transition brings it back")
	assert.Equal(t, string(state.PodBoosted), f.podState("p"))
}

func TestWithoutARecommendationTheBoostEndsAtTheRecordedCPU(t *testing.T) {
	vpa := boostVPA("150m", 0)
	vpa.Status.Recommendation = nil
	f := newFixture(t, []*corev1.Pod{boostedPod(t, "p", t0)}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{boost: true})
	require.NoError(t, f.sync("p"))
	assert.Equal(t, []string{`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"100m","memory":"100Mi"}}}]}}`}, f.resizePatches(),
		"back to the 100m the pod was created with")
	assert.Len(t, f.annotationRemovals(), 1)
}

func TestAFailedAnnotationRemovalIsRetriedWithoutASecondResize(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{boostedPod(t, "p", t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 0)}, fixtureOpts{boost: true})
	failed := false
	f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" && !failed {
			failed = true
			return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
		}
		return false, nil, nil
	})
	err := f.sync("p")
	require.Error(t, err, "retried with backoff")
	assert.Contains(t, err.Error(), "removing the startup boost annotations of c")
	require.Len(t, f.resizePatches(), 1)

	f.kubeletDone("p")
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "the CPU is already lowered: only the removal is left")
	assert.Len(t, f.annotationRemovals(), 2)
	assert.True(t, strings.HasPrefix(f.events()[0], "Pod/p Normal "+report.EventResizeSent))
}

func TestWithTheGateOffABoostIsNotLookedAt(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{boostedPod(t, "p", t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 600)}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "resized as any pod: the updater does not know boosts")
	assert.Empty(t, f.annotationRemovals())
}

// Without the grant (an install without the pods policy), the refused
// removal is said once and not retried with backoff: the resize is done.
func TestARefusedAnnotationRemovalIsReportedNotRetried(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{boostedPod(t, "p", t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 0)}, fixtureOpts{boost: true})
	f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "p", errors.New("not granted"))
		}
		return false, nil, nil
	})
	require.NoError(t, f.sync("p"), "not retried with backoff")
	require.Len(t, f.resizePatches(), 1)
	f.kubeletDone("p")
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "nothing more to resize")
	assert.Len(t, f.annotationRemovals(), 2, "tried again when decided again")
	var warnings []string
	for _, e := range f.events() {
		if strings.Contains(e, report.EventStartupBoostAnnotationForbidden) {
			warnings = append(warnings, e)
		}
	}
	assert.Len(t, warnings, 1, "said once")
}
