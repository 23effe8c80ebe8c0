package updater

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// countingResolver counts the target resolutions (which may read /scale).
type countingResolver struct {
	labelResolver
	targets *atomic.Int32
}

func (r countingResolver) Target(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (target.Target, error) {
	r.targets.Add(1)
	return r.labelResolver.Target(ctx, vpa)
}

// A VPA event only queues the VPA: its pods are found by a worker.
func TestVPAHandlerOnlyQueues(t *testing.T) {
	var targets atomic.Int32
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, nil, fixtureOpts{
		wrapResolver: func(r Resolver) Resolver {
			return countingResolver{labelResolver: r.(labelResolver), targets: &targets}
		},
	})
	f.ctrl.started.Store(true)
	f.queued() // the pod's own add event
	vpa := inPlaceVPA("300m", "100Mi")
	vpa.Namespace = "default"
	f.ctrl.onVPA(nil, vpa)
	assert.Zero(t, targets.Load(), "the handler resolves no target")
	assert.Equal(t, 1, f.ctrl.vpaQueue.Len())
	assert.Zero(t, f.ctrl.queue.Len())

	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Create(f.ctx, vpa, metav1.CreateOptions{})
	require.NoError(t, err)
	f.waitCached("web", func(*vpatypes.VerticalPodAutoscaler) bool { return true })
	require.NoError(t, f.ctrl.syncVPA(f.ctx, "default/web"))
	assert.Equal(t, int32(1), targets.Load())
	assert.Contains(t, f.queued(), "default/p", "the worker queued the VPA's pod")
}

// The kill switch's handler queues one key; the worker resyncs.
func TestKillSwitchHandlerOnlyQueues(t *testing.T) {
	f := newFixture(t, nil, nil, fixtureOpts{watchConfigMap: true})
	before := f.ctrl.vpaQueue.Len()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "vpa-inplace-updater-config"}, Data: map[string]string{PausedKey: "true"}}
	f.ctrl.onConfigMap(nil, cm)
	assert.Equal(t, before+1, f.ctrl.vpaQueue.Len())
}

// panickyResolver panics on one pod, as a bug triggered by one odd object
// would.
type panickyResolver struct{ labelResolver }

func (r panickyResolver) VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	if pod.Name == "bad" {
		var m map[string]int
		m["x"]++ // a nil map write
	}
	return r.labelResolver.VPAForPod(ctx, pod)
}

// A panic on one pod is recovered and counted; that pod is retried with
// backoff and the worker goes on with the next.
func TestWorkerRecoversFromAPanicInOneItem(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("bad").Running().Obj(), webPod("good").Running().Obj()},
		[]*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{
			wrapResolver: func(r Resolver) Resolver { return panickyResolver{r.(labelResolver)} },
		})
	f.queued()
	f.ctrl.queue.Add("default/bad")
	f.ctrl.queue.Add("default/good")
	require.True(t, f.ctrl.processNext(f.ctx, f.ctrl.queue, "pod", f.ctrl.sync))
	require.True(t, f.ctrl.processNext(f.ctx, f.ctrl.queue, "pod", f.ctrl.sync))
	assert.InDelta(t, 1, counter(t, f, report.MetricPanics, "queue", "pod"), 0)
	assert.Equal(t, 1, f.ctrl.queue.NumRequeues("default/bad"), "retried with backoff")
	assert.Len(t, f.resizePatches(), 1, "the good pod was resized")
}

// panickyCalculator panics on every pod, panickyTarget on every VPA.
type (
	panickyCalculator struct{ Calculator }
	panickyTarget     struct{ labelResolver }
)

func (panickyCalculator) ForPod(*corev1.Pod, *vpatypes.VerticalPodAutoscaler) (recommendation.Desired, error) {
	panic("computing: index out of range [3] with length 3")
}

func (panickyTarget) Target(context.Context, *vpatypes.VerticalPodAutoscaler) (target.Target, error) {
	panic("resolving: nil pointer")
}

// A recovered panic also goes on the VPA its item belongs to, as a warning:
// whoever owns the VPA sees that its pods are not being handled.
func TestWorkerPanicIsReportedOnTheVPA(t *testing.T) {
	tests := []struct {
		name       string
		opts       fixtureOpts
		queue, key string
		want       string
	}{
		{"a pod's decision, its VPA found by the resolver", fixtureOpts{calculator: panickyCalculator{}}, queuePod, "default/p",
			"VerticalPodAutoscaler/web Warning " + report.EventWorkerPanic + " The updater recovered from a panic while handling pod default/p; " +
				"it is retried with backoff: computing: index out of range [3] with length 3"},
		{"a VPA's pods queued", fixtureOpts{wrapResolver: func(r Resolver) Resolver { return panickyTarget{r.(labelResolver)} }}, queueVPA, "default/web",
			"VerticalPodAutoscaler/web Warning " + report.EventWorkerPanic + " The updater recovered from a panic while handling vpa default/web; " +
				"it is retried with backoff: resolving: nil pointer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, tc.opts)
			f.ctrl.started.Store(true)
			q, sync := f.ctrl.queue, f.ctrl.sync
			if tc.queue == queueVPA {
				q, sync = f.ctrl.vpaQueue, f.ctrl.syncVPA
			}
			f.queued()
			q.Add(tc.key)
			require.True(t, f.ctrl.processNext(f.ctx, q, tc.queue, sync))
			assert.InDelta(t, 1, counter(t, f, report.MetricPanics, "queue", tc.queue), 0)
			assert.Equal(t, []string{tc.want}, f.vpaEvents())
		})
	}

	t.Run("a tracked pod's VPA comes from its state, not from the resolver that panics", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("bad").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{
			wrapResolver: func(r Resolver) Resolver { return panickyResolver{r.(labelResolver)} },
		})
		f.ctrl.tracker.Set("uid-bad", state.Pod{VPA: "default/web", Name: "bad", State: state.PodResized}, t0)
		f.queued()
		f.ctrl.queue.Add("default/bad")
		require.True(t, f.ctrl.processNext(f.ctx, f.ctrl.queue, queuePod, f.ctrl.sync))
		events := f.vpaEvents()
		require.Len(t, events, 1)
		assert.Contains(t, events[0], "VerticalPodAutoscaler/web Warning "+report.EventWorkerPanic+" The updater recovered from a panic while handling pod default/bad")
	})
	t.Run("no VPA known: the panic is counted and logged only", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("bad").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{
			wrapResolver: func(r Resolver) Resolver { return panickyResolver{r.(labelResolver)} },
		})
		f.queued()
		f.ctrl.queue.Add("default/bad")
		require.True(t, f.ctrl.processNext(f.ctx, f.ctrl.queue, queuePod, f.ctrl.sync))
		assert.InDelta(t, 1, counter(t, f, report.MetricPanics, "queue", queuePod), 0)
		assert.Empty(t, f.vpaEvents(), "the second panic, in the resolver, is swallowed")
	})
}

// A pod deleted while a worker decides on it is not tracked again: its
// state would show in the VPA condition and the pending gauges forever.
func TestPodDeletedDuringSyncLeavesNoGhost(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{})
	pod := webPod("p").Running().Obj()
	vpa := inPlaceVPA("300m", "100Mi")
	vpa.Namespace = "default"
	// The delete event arrives while the worker is between its decision and
	// its report.
	f.ctrl.onPodDelete(klog.Background(), cache.DeletedFinalStateUnknown{Key: "default/p", Obj: pod})
	f.ctrl.report(f.ctx, pod, vpa, state.Pod{State: state.PodInProgress}, resize.Status{})
	assert.Empty(t, f.ctrl.tracker.Of("default/web"))
	pending, _ := f.ctrl.tracker.Counts(f.clock.Now())
	assert.Zero(t, pending[state.PodInProgress])

	t.Run("and a resync forgets states of pods no longer in the cache", func(t *testing.T) {
		f := newFixture(t, nil, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{})
		f.ctrl.tracker.Set("uid-gone", state.Pod{VPA: "default/web", Name: "gone", State: state.PodDeferred}, f.clock.Now())
		f.ctrl.CleanupRecords()
		assert.Empty(t, f.ctrl.tracker.Of("default/web"))
	})
}

// A pod refused with a transient error waits out its backoff: neither a
// resync nor a VPA event queues it sooner.
func TestResyncHonoursThePodBackoff(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "100Mi")}, fixtureOpts{})
	f.ctrl.started.Store(true)
	f.failResize(apierrors.NewTooManyRequests("exceeded quota", 1))
	f.queued()
	f.ctrl.queue.Add("default/p")
	require.True(t, f.ctrl.processNext(f.ctx, f.ctrl.queue, "pod", f.ctrl.sync))
	require.Equal(t, 1, f.ctrl.queue.NumRequeues("default/p"))
	f.ctrl.Resync(f.ctx)
	require.NoError(t, f.ctrl.syncVPA(f.ctx, "default/web"))
	assert.Zero(t, f.ctrl.queue.Len(), "the pod is not queued before its backoff ends")
	// The first backoff, on the queues' clock.
	f.stepUntil(200*time.Millisecond, func() bool { return f.ctrl.queue.Len() == 1 }, "the backoff brings it back")
}

// TestDecisionLogLevel: a pod up to date, what most updates come to, is
// logged at -v=4; a resize, a wait and any other skip at -v=2.
func TestDecisionLogLevel(t *testing.T) {
	for _, c := range []struct {
		d    resize.Decision
		want int
	}{
		{resize.Decision{Action: resize.ActionSkip, Reason: resize.ReasonUpToDate}, 4},
		{resize.Decision{Action: resize.ActionSkip, Reason: resize.ReasonNoRecommendation}, 2},
		{resize.Decision{Action: resize.ActionPatch, Reason: resize.ReasonResize}, 2},
		{resize.Decision{Action: resize.ActionWait, Reason: resize.ReasonResizeInProgress}, 2},
	} {
		assert.Equal(t, c.want, decisionLogLevel(c.d), "%s %s", c.d.Action, c.d.Reason)
	}
}
