package updater

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// fakeFence lets writes through for the namespaces it holds.
type fakeFence struct {
	mu      sync.Mutex
	held    map[string]bool
	guarded []string
	open    int
}

var errNotHeld = errors.New("shard not held")

func (f *fakeFence) Guard(ctx context.Context, namespace string) (context.Context, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.guarded = append(f.guarded, namespace)
	if !f.held[namespace] {
		return nil, nil, errNotHeld
	}
	f.open++
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.open--
		})
	}, nil
}

// A replica sends a resize only through its shard's fence: refused, the
// resize is not sent, the pod is retried and nothing is reported (no
// ResizeError on the VPA for a shard not held); let through, it is sent
// and the fence is told when it is answered.
func TestAResizeIsSentOnlyThroughItsShardsFence(t *testing.T) {
	fence := &fakeFence{held: map[string]bool{}}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{})
	f.ctrl.fence = fence

	err := f.sync("p")
	require.ErrorIs(t, err, errNotHeld, "a refused write is retried with backoff")
	assert.Empty(t, f.resizePatches())
	if s, ok := f.ctrl.tracker.Get(f.podUID("p")); ok {
		assert.NotEqual(t, state.PodError, s.State, "a shard not held reported as the pod's error: %s", s.Message)
	}
	require.NoError(t, f.syncStatus("web"))
	if c := f.condition("web"); c != nil {
		assert.NotEqual(t, condition.ReasonResizeError, c.Reason, "a shard not held reported on the VPA: %s", c.Message)
	}

	fence.mu.Lock()
	fence.held["default"] = true
	fence.mu.Unlock()
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1)
	fence.mu.Lock()
	defer fence.mu.Unlock()
	assert.Equal(t, []string{"default", "default"}, fence.guarded)
	assert.Zero(t, fence.open, "the write let through was not said done")
}

func (f *fixture) podUID(name string) types.UID {
	f.t.Helper()
	p, err := f.ctrl.pods.Pods("default").Get(name)
	require.NoError(f.t, err)
	return p.UID
}

// countingInformer counts the event handlers added to and removed from an
// informer.
type countingInformer struct {
	cache.SharedIndexInformer
	added, removed atomic.Int32
}

func (c *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.added.Add(1)
	return c.SharedIndexInformer.AddEventHandler(h)
}

func (c *countingInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	c.removed.Add(1)
	return c.SharedIndexInformer.RemoveEventHandler(r)
}

type countingPods struct {
	coreinformers.PodInformer
	informer *countingInformer
}

func (c countingPods) Informer() cache.SharedIndexInformer { return c.informer }

type countingNodes struct {
	coreinformers.NodeInformer
	informer *countingInformer
}

func (c countingNodes) Informer() cache.SharedIndexInformer { return c.informer }

// The controllers of a replica's spans of shards share the informers that
// stay whole (here the nodes and the pods bound to them): each adds the
// indexes they lack, and a controller closed leaves none of its handlers
// on them.
func TestControllersShareTheWholeInformersAndCloseLeavesNothingOnThem(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewClientset()
	vpaClient := vpafake.NewSimpleClientset()
	shared := informers.NewSharedInformerFactory(kube, 0)
	nodes := countingNodes{NodeInformer: shared.Core().V1().Nodes()}
	nodes.informer = &countingInformer{SharedIndexInformer: nodes.NodeInformer.Informer()}
	nodePods := countingPods{PodInformer: shared.Core().V1().Pods()}
	nodePods.informer = &countingInformer{SharedIndexInformer: nodePods.PodInformer.Informer()}
	gate := features.NewFeatureGate()
	require.NoError(t, gate.Set("InPlace=true"))

	build := func(namespace string) *Controller {
		t.Helper()
		own := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace))
		vpaFactory := vpainformers.NewSharedInformerFactoryWithOptions(vpaClient, 0, vpainformers.WithNamespace(namespace))
		vpas := vpaFactory.Autoscaling().V1().VerticalPodAutoscalers()
		c, err := New(ctx, Config{Workers: 1, ResyncInterval: time.Hour}, Deps{
			Client: kube, VPAClient: vpaClient, Pods: own.Core().V1().Pods(), VPAs: vpas,
			Resolver: labelResolver{vpas: func(ns string) []*vpatypes.VerticalPodAutoscaler {
				l, _ := vpas.Lister().VerticalPodAutoscalers(ns).List(labels.Everything())
				return l
			}},
			Calculator: recommendation.NewCalculator(limitrange.NewNoopLimitsCalculator()),
			Store:      records.NewInMemoryStore(), Nodes: nodes, NodePods: nodePods,
			Recorder: &eventRecorder{}, FeatureGate: gate, Clock: testingclock.NewFakeClock(t0),
		})
		require.NoError(t, err, "a controller beside another on the informers that stay whole")
		return c
	}
	a := build("team-a")
	b := build("team-b")
	require.Contains(t, nodePods.informer.GetIndexer().GetIndexers(), nodeIndex)
	added := nodes.informer.added.Load() + nodePods.informer.added.Load()
	require.Positive(t, added)

	b.Close()
	assert.Equal(t, added/2, nodes.informer.removed.Load()+nodePods.informer.removed.Load(), "the closed controller's handlers, all of them")
	a.Close()
	assert.Equal(t, added, nodes.informer.removed.Load()+nodePods.informer.removed.Load())
}

// A suspended Job's template is written through its shard's fence too.
func TestAJobTemplateIsWrittenOnlyThroughItsShardsFence(t *testing.T) {
	fence := &fakeFence{held: map[string]bool{}}
	f := newJobFixture(t, trainJob().Suspended().Obj(), jobVPA("250m", "200Mi"), fixtureOpts{})
	f.ctrl.fence = fence
	require.ErrorIs(t, f.syncJob("train"), errNotHeld)
	assert.Empty(t, f.jobPatches())

	fence.mu.Lock()
	fence.held["default"] = true
	fence.mu.Unlock()
	require.NoError(t, f.syncJob("train"))
	assert.Len(t, f.jobPatches(), 1)
	fence.mu.Lock()
	defer fence.mu.Unlock()
	assert.Zero(t, fence.open)
}

// countdownFence lets the first writes through, then none.
type countdownFence struct{ left atomic.Int32 }

func (f *countdownFence) Guard(ctx context.Context, _ string) (context.Context, func(), error) {
	if f.left.Add(-1) < 0 {
		return nil, nil, errNotHeld
	}
	return ctx, func() {}, nil
}

// The end of a startup boost writes the pod twice, the resize and the
// annotation's removal: each through the fence.
func TestTheEndOfABoostIsWrittenOnlyThroughItsShardsFence(t *testing.T) {
	pod := boostedPod(t, "p", t0)
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)}, fixtureOpts{boost: true})
	fence := &countdownFence{}
	fence.left.Store(1)
	f.ctrl.fence = fence
	f.clock.Step(20 * time.Second)
	require.ErrorIs(t, f.sync("p"), errNotHeld)
	assert.Len(t, f.resizePatches(), 1, "the resize, let through")
	assert.Empty(t, f.annotationRemovals(), "the removal, refused")
}

// queueRecorder is a Deps.QueueMetrics that counts, per queue, the items
// workers took.
type queueRecorder struct {
	mu    sync.Mutex
	asked []string
	taken map[string]int
}

func (r *queueRecorder) provider(queue string) workqueue.MetricsProvider {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, queue)
	return recordingProvider{r: r, queue: queue}
}

func (r *queueRecorder) takenFrom(queue string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.taken[queue]
}

type recordingProvider struct {
	r     *queueRecorder
	queue string
}

func (p recordingProvider) NewLatencyMetric(string) workqueue.HistogramMetric { return p }

// Observe is the library's report of an item a worker took.
func (p recordingProvider) Observe(float64) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	p.r.taken[p.queue]++
}

func (recordingProvider) NewDepthMetric(string) workqueue.GaugeMetric  { return noQueueMetric{} }
func (recordingProvider) NewAddsMetric(string) workqueue.CounterMetric { return noQueueMetric{} }
func (recordingProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return noQueueMetric{}
}
func (recordingProvider) NewRetriesMetric(string) workqueue.CounterMetric { return noQueueMetric{} }
func (recordingProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noQueueMetric{}
}
func (recordingProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noQueueMetric{}
}

type noQueueMetric struct{}

func (noQueueMetric) Inc()            {}
func (noQueueMetric) Dec()            {}
func (noQueueMetric) Set(float64)     {}
func (noQueueMetric) Observe(float64) {}

// queueDeps are the Deps of a controller on fake clients holding objs, with
// its informers' factories to start.
func queueDeps(t *testing.T, clk clock.WithTicker, kubeObjs, vpaObjs []runtime.Object) (Deps, func(<-chan struct{})) {
	t.Helper()
	kube := kubefake.NewClientset(kubeObjs...)
	vpaClient := vpafake.NewSimpleClientset(vpaObjs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	vpaFactory := vpainformers.NewSharedInformerFactory(vpaClient, 0)
	vpas := vpaFactory.Autoscaling().V1().VerticalPodAutoscalers()
	gate := features.NewFeatureGate()
	require.NoError(t, gate.Set("InPlace=true"))
	deps := Deps{
		Client: kube, VPAClient: vpaClient, Pods: factory.Core().V1().Pods(), VPAs: vpas,
		Resolver: labelResolver{vpas: func(ns string) []*vpatypes.VerticalPodAutoscaler {
			l, _ := vpas.Lister().VerticalPodAutoscalers(ns).List(labels.Everything())
			return l
		}},
		Calculator: recommendation.NewCalculator(limitrange.NewNoopLimitsCalculator()),
		Store:      records.NewInMemoryStore(), Recorder: &eventRecorder{}, FeatureGate: gate, Clock: clk,
	}
	return deps, func(stop <-chan struct{}) {
		factory.Start(stop)
		vpaFactory.Start(stop)
	}
}

// tickers counts the tickers of a clock not stopped yet: each queue runs
// one (its delays' heartbeat), and one more to update its metrics.
type tickers struct {
	clock.WithTicker
	live atomic.Int32
}

func (c *tickers) NewTicker(d time.Duration) clock.Ticker {
	c.live.Add(1)
	return &countedTicker{Ticker: c.WithTicker.NewTicker(d), live: &c.live}
}

type countedTicker struct {
	clock.Ticker
	live *atomic.Int32
	once sync.Once
}

func (t *countedTicker) Stop() {
	t.once.Do(func() { t.live.Add(-1) })
	t.Ticker.Stop()
}

// Each queue gets the metrics Deps.QueueMetrics gives for its name, and the
// library reports through them the items its workers take.
func TestEachQueueReportsToTheMetricsItIsGiven(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clk := testingclock.NewFakeClock(t0)
	deps, start := queueDeps(t, clk, []runtime.Object{webPod("p").Running().Obj()}, []runtime.Object{inPlaceVPA("300m", "300Mi")})
	rec := &queueRecorder{taken: map[string]int{}}
	deps.QueueMetrics = rec.provider
	c, err := New(ctx, Config{Workers: 1, ResyncInterval: time.Hour}, deps)
	require.NoError(t, err)
	defer c.Close()
	assert.ElementsMatch(t, []string{queuePod, queueVPA, queueCondition, queueJob}, rec.asked)

	start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.Eventually(t, func() bool { return rec.takenFrom(queuePod) > 0 },
		30*time.Second, 10*time.Millisecond, "the pod the first resync queued, taken by a worker")
	cancel()
	require.NoError(t, <-done)
}

// A controller closed without running, or not built at all, leaves no
// queue running: none of its tickers (the queues' heartbeats and their
// metrics' updates) is left.
func TestCloseAndAFailedNewStopTheQueues(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	t.Run("closed before Run", func(t *testing.T) {
		clk := &tickers{WithTicker: testingclock.NewFakeClock(t0)}
		deps, _ := queueDeps(t, clk, nil, nil)
		deps.QueueMetrics = (&queueRecorder{taken: map[string]int{}}).provider
		c, err := New(ctx, Config{Workers: 1, ResyncInterval: time.Hour}, deps)
		require.NoError(t, err)
		require.Positive(t, clk.live.Load(), "the queues run once built")
		c.Close()
		for _, q := range []workqueue.TypedRateLimitingInterface[string]{c.queue, c.vpaQueue, c.statusQueue, c.jobQueue} {
			assert.True(t, q.ShuttingDown())
		}
		assert.Zero(t, clk.live.Load(), "tickers of the queues left running")
	})
	t.Run("New fails", func(t *testing.T) {
		clk := &tickers{WithTicker: testingclock.NewFakeClock(t0)}
		deps, _ := queueDeps(t, clk, nil, nil)
		deps.QueueMetrics = (&queueRecorder{taken: map[string]int{}}).provider
		// An informer stopped takes no handler: New fails after building
		// its queues.
		stopped, stop := context.WithCancel(ctx)
		go deps.Pods.Informer().RunWithContext(stopped)
		require.Eventually(t, deps.Pods.Informer().HasSynced, 30*time.Second, time.Millisecond)
		stop()
		require.Eventually(t, deps.Pods.Informer().IsStopped, 30*time.Second, time.Millisecond)
		_, err := New(ctx, Config{Workers: 1, ResyncInterval: time.Hour}, deps)
		require.Error(t, err)
		assert.Zero(t, clk.live.Load(), "tickers of the queues of the controller not built left running")
	})
}
