package updater

import (
	"context"
	"errors"
	"fmt"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	clienttesting "k8s.io/client-go/testing"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

var webOwner = records.Owner{Namespace: "default", Name: "web", UID: "uid-web"}

func webPod(name string) *testpod.Builder {
	return testpod.New(name).Container("c", "100m", "100Mi").OwnedBy("apps/v1", "ReplicaSet", "web-rs")
}

func inPlaceVPA(cpu, mem string) *vpatypes.VerticalPodAutoscaler {
	return testvpa.New("web").InPlace().Recommend("c", cpu, mem).Obj()
}

func nodeCapacityErr() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `pods "p" is forbidden: node didn't have enough allocatable resources: cpu, requested: 8000, allocatable: 3500`,
		Details: &metav1.StatusDetails{Kind: "pods", Name: "p", Causes: []metav1.StatusCause{{Type: resize.CauseNodeCapacity}}},
	}}
}

func TestPatchOutcomes(t *testing.T) {
	t.Run("patch succeeds: clear any stored infeasible attempt", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
		f.store.Put(webOwner, "uid-p", &records.Record{Kind: records.KindNodeCapacity, Attempted: resources.Resources{"c": {Requests: testpod.List("8", "300Mi")}}})
		require.NoError(t, f.sync("p"))
		assert.Len(t, f.resizePatches(), 1)
		_, held := f.store.Get("uid-p")
		assert.False(t, held)
		ev := f.events()
		require.Len(t, ev, 1)
		assert.Contains(t, ev[0], "Normal "+report.EventResizeSent)

		pod, err := f.kube.CoreV1().Pods("default").Get(f.ctx, "p", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "300m", pod.Spec.Containers[0].Resources.Requests.Cpu().String(), "the patch reached the pod")
		assert.InDelta(t, 1, counter(t, f, report.MetricResizesSent), 0)
		assert.InDelta(t, 1, counter(t, f, report.MetricDecisions, "action", "Patch", "reason", "Resize"), 0)
	})

	t.Run("patch fails with error containing NodeCapacity cause: store attempted recommendation as infeasible, skip pod", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("8", "100Mi")}, fixtureOpts{})
		f.failResize(nodeCapacityErr())
		require.NoError(t, f.sync("p"), "a NodeCapacity rejection is recorded, not retried")
		r, held := f.store.Get("uid-p")
		require.True(t, held)
		assert.Equal(t, records.KindNodeCapacity, r.Kind)
		assert.Equal(t, "c: requests cpu=8 memory=100Mi", r.Attempted.String())
		assert.Contains(t, r.Message, "allocatable")
		assert.InDelta(t, 1, counter(t, f, report.MetricResizeFailures, "reason", "NodeCapacity"), 0)
		n, err := testutil.GatherAndCount(f.registry, report.MetricInfeasibleRecords)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		ev := f.events()
		require.Len(t, ev, 1)
		assert.Contains(t, ev[0], "Warning "+report.EventResizeInfeasible)

		// The same recommendation again: no new attempt, no new event.
		require.NoError(t, f.sync("p"))
		assert.Len(t, f.resizePatches(), 1)
		assert.Empty(t, f.events())
	})

	t.Run("patch fails with transient error: do nothing, retried with backoff", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
		f.failResize(apierrors.NewInternalError(errors.New("etcd leader changed")))
		err := f.sync("p")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Transient")
		assert.Equal(t, 0, f.store.Len())
		assert.Empty(t, f.events())
	})

	t.Run("patch keeps failing with transient errors: reported from the third in a row", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
		f.ctrl.started.Store(true)
		f.failResize(apierrors.NewTooManyRequests("the API server is busy", 1))
		f.ctrl.queue.Add("default/p")
		for i := range 3 {
			require.True(t, f.ctrl.processNext(f.ctx, f.ctrl.queue, "pod", f.ctrl.sync))
			require.NoError(t, f.syncStatus("web"))
			c := f.condition("web")
			if i < quietTransientFailures {
				if c != nil {
					assert.NotEqual(t, condition.ReasonResizeError, c.Reason, "failure %d reported: %s", i+1, c.Message)
				}
				// The backoff, on the queues' clock.
				f.stepUntil(time.Duration(200<<i)*time.Millisecond, func() bool { return f.ctrl.queue.Len() == 1 }, "the backoff brings it back")
				continue
			}
			require.NotNil(t, c)
			assert.Equal(t, condition.ReasonResizeError, c.Reason)
			assert.Contains(t, c.Message, "the API server is busy")
		}
		assert.Len(t, f.resizePatches(), 3)
	})

	t.Run("patch times out: retried with backoff, nothing recorded", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
		f.failResize(fmt.Errorf("request: %w", context.DeadlineExceeded))
		require.Error(t, f.sync("p"))
		assert.Equal(t, 0, f.store.Len())
	})

	t.Run("patch rejected as invalid (422): recorded with the reason, not retried in a loop", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
		f.failResize(apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{
			field.Invalid(field.NewPath("spec"), "Burstable", "Pod QOS Class may not change as a result of resizing")}))
		require.NoError(t, f.sync("p"))
		r, held := f.store.Get("uid-p")
		require.True(t, held)
		assert.Equal(t, records.KindInvalid, r.Kind)
		assert.Contains(t, r.Message, "QOS Class")
		ev := f.events()
		require.Len(t, ev, 1)
		assert.Contains(t, ev[0], "Warning "+report.EventResizeInvalid)
		require.NoError(t, f.sync("p"))
		assert.Len(t, f.resizePatches(), 1, "no second attempt for the same values")
	})

	t.Run("patch finds the pod gone: nothing to do", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
		f.failResize(apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p"))
		require.NoError(t, f.sync("p"))
		assert.Equal(t, 0, f.store.Len())
	})
}

func TestExactlyOneWritePerChange(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Equal(t, []string{"patch pods/resize"}, f.writes())
	// The informer sees the patched pod; nothing changed since: no re-patch.
	require.Eventually(t, func() bool {
		p, err := f.ctrl.pods.Pods("default").Get("p")
		return err == nil && p.Spec.Containers[0].Resources.Requests.Cpu().String() == "300m"
	}, waitFor, 10*time.Millisecond)
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.sync("p"))
	assert.Equal(t, []string{"patch pods/resize"}, f.writes())
}

func TestKubeletInfeasibleIsRecordedOnce(t *testing.T) {
	pod := testpod.New("p").Container("c", "4", "100Mi").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().
		Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`).Obj()
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("4", "100Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	r, held := f.store.Get("uid-p")
	require.True(t, held)
	assert.Equal(t, records.KindInfeasible, r.Kind)
	assert.Equal(t, "c: requests cpu=4 memory=100Mi", r.Attempted.String())
	assert.Equal(t, time.Unix(1_800_000_000, 0), r.RecordedAt)
	require.Len(t, f.events(), 1)
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.events(), "recorded once")
	assert.Empty(t, f.resizePatches())
}

func TestDeferredIsWaitedForWithoutRepatch(t *testing.T) {
	pod := webPod("p").Running().Condition(corev1.PodResizePending, corev1.PodReasonDeferred, "Node didn't have enough resource: cpu").Obj()
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("2", "100Mi")}, fixtureOpts{})
	for range 3 {
		require.NoError(t, f.sync("p"))
	}
	assert.Empty(t, f.writes())
	assert.Equal(t, 0, f.store.Len())
}

func TestFeatureGateOffSkipsInPlaceVPAs(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj(), webPod("q").Running().Obj()},
		[]*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{gateOff: true})
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.sync("q"))
	assert.Empty(t, f.writes(), "no resize, no eviction")
	f.ctrl.mu.Lock()
	defer f.ctrl.mu.Unlock()
	assert.Equal(t, 1, f.ctrl.gateOffLogged.Len(), "logged once per VPA")
}

func TestOtherModesAreLeftAlone(t *testing.T) {
	for _, mode := range []vpatypes.UpdateMode{vpatypes.UpdateModeOff, vpatypes.UpdateModeInitial, vpatypes.UpdateModeRecreate, vpatypes.UpdateModeInPlaceOrRecreate} {
		t.Run(string(mode), func(t *testing.T) {
			vpa := testvpa.New("web").Mode(mode).Recommend("c", "300m", "300Mi").Obj()
			f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
			require.NoError(t, f.sync("p"))
			assert.Empty(t, f.writes())
		})
	}
}

func TestSingleReplicaWorkloadIsResized(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("only").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("only"))
	assert.Len(t, f.resizePatches(), 1)
}

func TestDisruptiveResizesRespectEvictionTolerance(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 4 {
		pods = append(pods, webPod(fmt.Sprintf("p%d", i)).ResizePolicy("c", corev1.ResourceCPU, corev1.RestartContainer).Running().Obj())
	}
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{tolerance: 0.5})
	for i := range 4 {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Len(t, f.resizePatches(), 2, "floor(0.5 x 4) pods restarted at once")

	t.Run("non-disruptive resizes are not limited", func(t *testing.T) {
		var pods []*corev1.Pod
		for i := range 4 {
			pods = append(pods, webPod(fmt.Sprintf("p%d", i)).Running().Obj())
		}
		f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{tolerance: 0.5})
		for i := range 4 {
			require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
		}
		assert.Len(t, f.resizePatches(), 4)
	})
}

func TestStaleRecordsAreCleanedUp(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")}, fixtureOpts{})
	f.store.Put(webOwner, "uid-p", &records.Record{Kind: records.KindInfeasible})
	f.store.Put(webOwner, "uid-gone", &records.Record{Kind: records.KindNodeCapacity})
	assert.Equal(t, []types.UID{"uid-gone"}, f.ctrl.CleanupRecords())
	_, held := f.store.Get("uid-p")
	assert.True(t, held)

	t.Run("a deleted pod's record is forgotten at once", func(t *testing.T) {
		require.NoError(t, f.kube.CoreV1().Pods("default").Delete(f.ctx, "p", metav1.DeleteOptions{}))
		assert.Eventually(t, func() bool { return f.store.Len() == 0 }, waitFor, 10*time.Millisecond)
	})
}

func TestRecommendationChangeIsActedOnFromEvents(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")}, fixtureOpts{})
	f.run()

	vpa := inPlaceVPA("500m", "100Mi")
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(f.ctx, vpa, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return len(f.resizePatches()) == 1 }, waitFor, 20*time.Millisecond,
		"the VPA update alone triggers the resize, long before the resync interval")
	assert.True(t, strings.Contains(f.resizePatches()[0], `"cpu":"500m"`), f.resizePatches())
}

func TestRememberedRecommendationsFollowTheVPA(t *testing.T) {
	memo := recommendation.NewMemo(recommendation.NewCalculator(limitrange.NewNoopLimitsCalculator()), nil)
	vpa := inPlaceVPA("100m", "100Mi")
	vpa.ResourceVersion = "1"
	pods := []*corev1.Pod{webPod("p").Running().Obj(), webPod("q").Running().Obj()}
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{calculator: memo})
	f.run()
	require.Eventually(t, func() bool { return memo.Len() == 1 }, waitFor, 20*time.Millisecond, "the pods' results are remembered")
	assert.Empty(t, f.resizePatches())

	vpa = inPlaceVPA("500m", "100Mi")
	vpa.ResourceVersion = "2"
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(f.ctx, vpa, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return len(f.resizePatches()) == 2 }, waitFor, 20*time.Millisecond,
		"a new version of the VPA is computed again")
	for _, p := range f.resizePatches() {
		assert.Contains(t, p, `"cpu":"500m"`)
	}

	require.NoError(t, f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Delete(f.ctx, "web", metav1.DeleteOptions{}))
	assert.Eventually(t, func() bool { return memo.Len() == 0 }, waitFor, 20*time.Millisecond,
		"a deleted VPA's results are forgotten")
}

// A key that is not a pod's, or whose pod is gone, is dropped: neither
// retried nor acted on.
func TestUnparsableKeyIsDropped(t *testing.T) {
	f := newFixture(t, nil, nil, fixtureOpts{})
	f.queued()
	before := len(f.writes())
	for _, key := range []string{"a/b/c", "default/missing"} {
		f.ctrl.queue.Add(key)
		require.True(t, f.ctrl.processNext(f.ctx, f.ctrl.queue, "pod", f.ctrl.sync))
		assert.Zero(t, f.ctrl.queue.NumRequeues(key), "%s is not retried", key)
	}
	assert.Zero(t, f.ctrl.queue.Len(), "nothing queued again")
	assert.Len(t, f.writes(), before, "nothing written")
}

// A pod queued again before the cache has seen the resize just sent (the
// first resync racing with an event, at start) is not patched twice.
func TestStaleCacheAfterAResizeIsNotPatchedAgain(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
	stale, err := f.ctrl.pods.Pods("default").Get("p")
	require.NoError(t, err)
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	// Put the pre-patch pod back in the cache, as if the watch lagged.
	require.NoError(t, f.ctrl.podIdx.Update(stale))
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "the stale pod is not decided on")
}

// A watch that lags for long does not get a pod patched twice either: once
// its update event is overdue, the pod is read from the API server and
// decided on as it is there.
func TestLongStaleCacheReadsThePodInsteadOfPatchingAgain(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
	var getErr error
	f.kube.PrependReactor("get", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return getErr != nil, nil, getErr
	})
	stale, err := f.ctrl.pods.Pods("default").Get("p")
	require.NoError(t, err)
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	// The watch delivers the patched pod; then the stale one is put back,
	// as if it never had.
	require.Eventually(t, func() bool {
		cached, err := f.ctrl.pods.Pods("default").Get("p")
		return err == nil && cached.ResourceVersion != stale.ResourceVersion
	}, waitFor, 10*time.Millisecond)
	require.NoError(t, f.ctrl.podIdx.Update(stale))

	f.clock.Step(state.MaxCacheLag - time.Second)
	require.NoError(t, f.sync("p"))
	assert.Zero(t, podGets(f), "the pod's update event is awaited for a while")

	f.clock.Step(time.Second)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "the pod read from the API server has the resize already")
	assert.Equal(t, 1, podGets(f), "one read of the pod")
	assert.InDelta(t, 1, counter(t, f, report.MetricStaleCacheReads), 0)
	states := f.ctrl.tracker.Of("default/web")
	require.Len(t, states, 1)
	assert.Equal(t, state.PodResized, states[0].State, "decided on the pod as the API server has it")

	// The cache is still behind: read again, never patched from it.
	f.clock.Step(time.Minute)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1)
	assert.Equal(t, 2, podGets(f))

	getErr = apierrors.NewServiceUnavailable("etcd leader changed")
	err = f.sync("p")
	require.Error(t, err, "retried with backoff")
	assert.Contains(t, err.Error(), "reading pod from the API server")
	assert.Len(t, f.resizePatches(), 1)

	getErr = apierrors.NewNotFound(corev1.Resource("pods"), "p")
	require.NoError(t, f.sync("p"), "gone: its delete event untracks it")
	assert.Len(t, f.resizePatches(), 1)
}

// The pod read from the API server after a long lag is patched again (its
// recommendation changed meanwhile); the lagging cache may still hold the
// pod as it was before the first resize. That version predates both
// resizes: it is not decided on, so the resize is not sent a third time.
func TestLaggingCacheOlderThanThePodReadIsNotDecidedOn(t *testing.T) {
	pod := webPod("p").Running().Obj()
	pod.ResourceVersion = "10"
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
	stale, err := f.ctrl.pods.Pods("default").Get("p")
	require.NoError(t, err)
	require.Equal(t, "10", stale.ResourceVersion)
	lagBehind := func() {
		t.Helper()
		live, err := f.kube.CoreV1().Pods("default").Get(f.ctx, "p", metav1.GetOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			cached, err := f.ctrl.pods.Pods("default").Get("p")
			return err == nil && cached.ResourceVersion == live.ResourceVersion
		}, waitFor, 10*time.Millisecond)
		require.NoError(t, f.ctrl.podIdx.Update(stale))
	}

	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	lagBehind()
	_, err = f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(f.ctx, inPlaceVPA("400m", "300Mi"), metav1.UpdateOptions{})
	require.NoError(t, err)
	f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool {
		return v.Status.Recommendation.ContainerRecommendations[0].Target.Cpu().String() == "400m"
	})
	f.clock.Step(state.MaxCacheLag)
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 2, "decided on the pod read from the API server")
	assert.Contains(t, f.resizePatches()[1], `"cpu":"400m"`)

	lagBehind()
	gets := podGets(f)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 2, "the version before both resizes is not decided on")
	assert.Equal(t, gets, podGets(f), "nor is the pod read again before its update is overdue")
}

func podGets(f *fixture) int {
	n := 0
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

// A resize patch that changes nothing (the pod had the target already, the
// cache was behind it) brings no update event: the pod is decided on again
// at once, not held waiting for one.
func TestNoOpResizePatchLeavesNoCacheExpectation(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
	f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := f.kube.Tracker().Get(a.GetResource(), a.GetNamespace(), "p")
		return true, obj, err // as the API server answers a patch that changes nothing
	})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	pod, err := f.ctrl.pods.Pods("default").Get("p")
	require.NoError(t, err)
	behind, _ := f.ctrl.tracker.CacheLag(pod.UID, pod.ResourceVersion, f.clock.Now())
	assert.False(t, behind)
}
