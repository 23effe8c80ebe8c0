package updater

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/cachetrim"
	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/usage"
)

// t0 is the fixtures' clock at start.
var t0 = time.Unix(1_800_000_000, 0)

// systemNamespace holds the kill switch ConfigMap in tests.
const systemNamespace = "vpa-inplace-system"

// labelResolver matches pods to the VPAs of their namespace by the label
// app=<vpa targetRef name>.
type labelResolver struct {
	vpas func(ns string) []*vpatypes.VerticalPodAutoscaler
}

func (r labelResolver) VPAForPod(_ context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	for _, v := range r.vpas(pod.Namespace) {
		if pod.Labels["app"] == v.Spec.TargetRef.Name {
			return v, nil
		}
	}
	return nil, nil
}

// VPAForJob matches a Job to the VPA of its namespace naming its controller
// (the Job, or the CronJob controlling it), as pkg/target does.
func (r labelResolver) VPAForJob(_ context.Context, job *batchv1.Job) (*vpatypes.VerticalPodAutoscaler, error) {
	kind, name, ok := target.JobController(job)
	if !ok {
		return nil, nil
	}
	for _, v := range r.vpas(job.Namespace) {
		if target.TargetsBatch(v, kind, name) {
			return v, nil
		}
	}
	return nil, nil
}

func (labelResolver) Target(_ context.Context, vpa *vpatypes.VerticalPodAutoscaler) (target.Target, error) {
	return target.Target{Selector: labels.SelectorFromSet(labels.Set{"app": vpa.Spec.TargetRef.Name})}, nil
}

func (labelResolver) Forget(types.UID) {}

type fixture struct {
	t        testing.TB
	ctx      context.Context
	kube     *kubefake.Clientset
	vpa      *vpafake.Clientset
	store    records.Store
	memStore records.Store
	pods     *deliveringPods // the pod informer, knowing what its handlers were handed
	recorder *eventRecorder
	// clock is the controller's one clock: its queues' delays pass
	// only when a test steps it.
	clock *testingclock.FakeClock
	// watched is the controller's clock with fixtureOpts.watchClock.
	watched  *watchedClock
	ctrl     *Controller
	registry *prometheus.Registry
	opts     fixtureOpts
	// podQueue and statusQueue record the controller's delayed requeues.
	podQueue    *delays
	statusQueue *delays
}

type fixtureOpts struct {
	gateOff   bool
	tolerance float64
	dryRun    bool
	// deferredWarningAfter is --deferred-warning-after (0: disabled).
	deferredWarningAfter time.Duration
	// watchConfigMap turns on the cluster-wide kill switch, read from
	// vpa-inplace-system/vpa-inplace-updater-config.
	watchConfigMap bool
	// durable uses the VPA annotation store instead of memory.
	durable bool
	// store replaces the store (durable is then ignored).
	store             records.Store
	statusMinInterval time.Duration
	// jobs are created with the pods.
	jobs []*batchv1.Job
	// serverMinor is the API server's minor version (default 37).
	serverMinor int
	// wrapResolver, when set, wraps the fixture's resolver.
	wrapResolver func(Resolver) Resolver
	// watchClock gives the controller f.clock through f.watched, which
	// tells when the controller waits on it.
	watchClock bool
	// resolver replaces the label resolver, built on the VPA lister.
	resolver func(testing.TB, cache.Indexer) Resolver
	// usage tells the memory in use by containers; nil: unknown.
	usage usage.Source
	// memoryMargin is --memory-limit-decrease-margin.
	memoryMargin float64
	// reversalHold is --resize-reversal-hold.
	reversalHold time.Duration
	// decreaseMinHistory is --decrease-min-history.
	decreaseMinHistory time.Duration
	// calculator replaces the plain calculator (with no LimitRanges).
	calculator Calculator
	// pdbs are created with the pods and watched.
	pdbs []*policyv1.PodDisruptionBudget
	// nodes are created with the pods and watched.
	nodes []*corev1.Node
	// namespaces are created with the pods and watched (resize windows).
	namespaces []*corev1.Namespace
	// checkpoints are created with the VPAs and read (the evidence rule).
	checkpoints []*vpatypes.VerticalPodAutoscalerCheckpoint
	// recordsNotLoaded leaves the controller as before Run has loaded the
	// records; otherwise sync may be called without Run.
	recordsNotLoaded bool
	// boost turns the CPUStartupBoost gate on.
	boost bool
	// boostMaxRestarts is --startup-boost-max-restarts (0: restarts are
	// not boosted).
	boostMaxRestarts int32
	// podNamespace caches the pods of that namespace only, as
	// --vpa-object-namespace does.
	podNamespace string
	// workers is Config.Workers (0: 1).
	workers int
	// safety replaces the safety records' store (memory otherwise).
	safety records.Store
	// durableSafety keeps the safety records in the VPA annotation
	// durableSafetyKey (safety is then ignored).
	durableSafety bool
	// canary is --canary (zero: the default, 1 pod).
	canary resize.Canary
	// observationWindow is --resize-observation-window (0: the default).
	observationWindow time.Duration
	// nodeRoom reserves fits-node room across replicas (--shards above 1).
	nodeRoom SharedRoom
}

// gatedResolver holds every VPAForPod until release is closed, and closes
// entered at the first.
type gatedResolver struct {
	Resolver
	entered, release chan struct{}
	once, opened     sync.Once
}

// open lets every VPAForPod through.
func (r *gatedResolver) open() { r.opened.Do(func() { close(r.release) }) }

func (r *gatedResolver) VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	r.once.Do(func() { close(r.entered) })
	<-r.release
	return r.Resolver.VPAForPod(ctx, pod)
}

func newFixture(t testing.TB, pods []*corev1.Pod, vpas []*vpatypes.VerticalPodAutoscaler, o fixtureOpts) *fixture {
	t.Helper()
	var kubeObjs, vpaObjs []runtime.Object
	for _, p := range pods {
		kubeObjs = append(kubeObjs, p)
	}
	for _, j := range o.jobs {
		kubeObjs = append(kubeObjs, j)
	}
	for _, p := range o.pdbs {
		kubeObjs = append(kubeObjs, p)
	}
	for _, n := range o.nodes {
		kubeObjs = append(kubeObjs, n)
	}
	for _, n := range o.namespaces {
		kubeObjs = append(kubeObjs, n)
	}
	for _, v := range vpas {
		vpaObjs = append(vpaObjs, v)
	}
	for _, cp := range o.checkpoints {
		vpaObjs = append(vpaObjs, cp)
	}
	kube := kubefake.NewClientset(kubeObjs...)
	bumpResourceVersions(kube)
	return newFixtureOn(t, kube, vpafake.NewSimpleClientset(vpaObjs...), o)
}

// newFixtureOn builds a controller, with its own informers and store, on
// existing clients: a second call is the updater after a restart, or another
// replica.
func newFixtureOn(t testing.TB, kube *kubefake.Clientset, vpaClient *vpafake.Clientset, o fixtureOpts) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	// The caches are trimmed as the binaries trim them: every test decides
	// on what the updater really holds of a pod.
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(cachetrim.Transform))
	systemFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(systemNamespace))
	vpaFactory := vpainformers.NewSharedInformerFactoryWithOptions(vpaClient, 0, vpainformers.WithTransform(cachetrim.Transform))
	vpaInformer := vpaFactory.Autoscaling().V1().VerticalPodAutoscalers()
	// With podNamespace, pods are cached as --vpa-object-namespace caches
	// them: that namespace's only.
	// and fits-node reads a cluster-wide view of the pods bound to nodes,
	// trimmed as the binary trims it.
	podFactory, nodePodFactory := kubeFactory, kubeFactory
	if o.podNamespace != "" {
		podFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(o.podNamespace), informers.WithTransform(cachetrim.Transform))
		nodePodFactory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(cachetrim.NodeView))
	}
	podInformer := newDeliveringPods(podFactory.Core().V1().Pods())

	gate := features.NewFeatureGate()
	if !o.gateOff {
		require.NoError(t, gate.Set("InPlace=true"))
	}
	if o.boost {
		require.NoError(t, gate.Set("CPUStartupBoost=true"))
	}
	if o.tolerance == 0 {
		o.tolerance = 0.5
	}
	if o.statusMinInterval == 0 {
		o.statusMinInterval = -1 // no rate limit, unless a test asks for one
	}
	vpaLister := vpaInformer.Lister()
	f := &fixture{t: t, ctx: ctx, kube: kube, vpa: vpaClient, recorder: &eventRecorder{}, clock: testingclock.NewFakeClock(t0), opts: o, pods: podInformer}
	switch {
	case o.store != nil:
		f.store = o.store
	case o.durable:
		f.store = records.NewVPAStore(vpaClient.AutoscalingV1(), vpaLister, records.VPAStoreConfig{Now: f.clock.Now, Live: f.recordLive})
	default:
		f.store = records.NewInMemoryStore()
	}
	f.memStore = records.NewInMemoryStore()
	if o.durable {
		f.memStore = records.NewVPAStore(vpaClient.AutoscalingV1(), vpaLister, records.VPAStoreConfig{AnnotationKey: records.MemoryAnnotationKey, Now: f.clock.Now, Live: f.recordLive})
	}
	if o.serverMinor == 0 {
		o.serverMinor = 37
	}
	if o.durableSafety {
		o.safety = records.NewVPAStore(vpaClient.AutoscalingV1(), vpaLister, records.VPAStoreConfig{AnnotationKey: durableSafetyKey, Now: f.clock.Now,
			Live: func(owner records.Owner, uid types.UID) bool { return f.ctrl.SafetyRecordLive(owner, uid) }})
	}
	f.registry = prometheus.NewRegistry()
	metrics, err := report.NewMetrics(f.registry)
	require.NoError(t, err)
	deps := Deps{
		Client:    kube,
		VPAClient: vpaClient,
		Pods:      podInformer,
		VPAs:      vpaInformer,
		Resolver: labelResolver{vpas: func(ns string) []*vpatypes.VerticalPodAutoscaler {
			l, _ := vpaLister.VerticalPodAutoscalers(ns).List(labels.Everything())
			return l
		}},
		Calculator:    recommendation.NewCalculator(limitrange.NewNoopLimitsCalculator()),
		Jobs:          kubeFactory.Batch().V1().Jobs(),
		Store:         f.store,
		MemoryRecords: f.memStore,
		SafetyRecords: o.safety,
		Usage:         o.usage,
		Recorder:      f.recorder,
		FeatureGate:   gate,
		Clock:         f.clock,
		Metrics:       metrics,
	}
	if o.resolver != nil {
		deps.Resolver = o.resolver(t, vpaInformer.Informer().GetIndexer())
	}
	if o.calculator != nil {
		deps.Calculator = o.calculator
	}
	if o.watchClock {
		f.watched = &watchedClock{WithTicker: f.clock}
		deps.Clock = f.watched
	}
	if o.wrapResolver != nil {
		deps.Resolver = o.wrapResolver(deps.Resolver)
	}
	cfg := Config{
		Threshold: 0.1, EvictionTolerance: o.tolerance, ResyncInterval: time.Hour, Workers: max(1, o.workers), ServerMinor: o.serverMinor,
		DryRun: o.dryRun, DeferredWarningAfter: o.deferredWarningAfter, StatusMinInterval: o.statusMinInterval,
		MemoryLimitMargin: o.memoryMargin, ReversalHold: o.reversalHold, BoostMaxRestarts: o.boostMaxRestarts,
		Canary: o.canary, ObservationWindow: o.observationWindow, DecreaseMinHistory: o.decreaseMinHistory,
	}
	if o.pdbs != nil {
		deps.PDBs = kubeFactory.Policy().V1().PodDisruptionBudgets()
	}
	if o.nodes != nil {
		deps.Nodes = kubeFactory.Core().V1().Nodes()
		deps.NodePods = nodePodFactory.Core().V1().Pods()
		deps.NodeRoom = o.nodeRoom
	}
	if o.namespaces != nil {
		deps.Namespaces = kubeFactory.Core().V1().Namespaces()
	}
	if o.checkpoints != nil {
		deps.Checkpoints = vpaFactory.Autoscaling().V1().VerticalPodAutoscalerCheckpoints()
	}
	if o.watchConfigMap {
		deps.ConfigMaps = systemFactory.Core().V1().ConfigMaps()
		cfg.ConfigMap = types.NamespacedName{Namespace: systemNamespace, Name: "vpa-inplace-updater-config"}
	}
	ctrl, err := New(ctx, cfg, deps)
	require.NoError(t, err)
	f.podQueue = &delays{TypedRateLimitingInterface: ctrl.queue, after: map[string][]time.Duration{}}
	ctrl.queue = f.podQueue
	f.statusQueue = &delays{TypedRateLimitingInterface: ctrl.statusQueue, after: map[string][]time.Duration{}}
	ctrl.statusQueue = f.statusQueue
	f.ctrl = ctrl
	ctrl.recordsLoaded.Store(!o.recordsNotLoaded)
	factories := []informers.SharedInformerFactory{kubeFactory, podFactory, nodePodFactory, systemFactory}
	for _, factory := range factories {
		factory.Start(ctx.Done())
	}
	vpaFactory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), ctrl.synced...))
	if deps.Checkpoints != nil { // not among ctrl.synced: not waited for by the binary
		require.True(t, cache.WaitForCacheSync(ctx.Done(), deps.Checkpoints.Informer().HasSynced))
	}
	t.Cleanup(func() {
		cancel()
		for _, factory := range factories {
			factory.Shutdown()
		}
		vpaFactory.Shutdown()
	})
	return f
}

// run runs the controller until stop is called or the test ends.
func (f *fixture) run() (stop func()) {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- f.ctrl.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(f.t, <-done)
		})
	}
	f.t.Cleanup(stop)
	return stop
}

// recordLive is the durable stores' check at Load: the controller's, as
// cmd/updater wires it.
func (f *fixture) recordLive(owner records.Owner, uid types.UID) bool {
	return f.ctrl.RecordLive(owner, uid)
}

// stepUntil steps the clock by d, and by d again until due holds: a
// delayed item of a queue comes due at the step that passes its time, or
// at a later one when the queue read the time just before that step and
// set its timer after it (client-go's delaying queue then sees the item
// due at its next heartbeat, every ten seconds of the clock).
func (f *fixture) stepUntil(d time.Duration, due func() bool, msg string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		if due() {
			return true
		}
		f.clock.Step(d)
		return false
	}, waitFor, every, msg)
}

// queued drains the pod queue and returns the keys it held, sorted.
func (f *fixture) queued() []string {
	var out []string
	for f.ctrl.queue.Len() > 0 {
		key, _ := f.ctrl.queue.Get()
		f.ctrl.queue.Done(key)
		out = append(out, key)
	}
	sort.Strings(out)
	return out
}

// failResize makes every resize patch fail with err.
func (f *fixture) failResize(err error) {
	f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "resize" {
			return true, nil, err
		}
		return false, nil, nil
	})
}

func (f *fixture) sync(pod string) error {
	return f.ctrl.sync(f.ctx, "default/"+pod)
}

func (f *fixture) syncStatus(vpa string) error {
	return f.ctrl.conditions.Sync(f.ctx, "default/"+vpa)
}

// resizePatches returns the resize patches sent so far.
func (f *fixture) resizePatches() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "resize" {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

// resizedPods returns the names of the pods resize patches were sent to.
func (f *fixture) resizedPods() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "resize" {
			out = append(out, p.GetName())
		}
	}
	return out
}

// writes returns every write action sent to the Kubernetes API (not VPAs).
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	return out
}

// statusWrites returns the updater's patches of VPA status (the recommender
// of some tests writes JSON patches).
func (f *fixture) statusWrites() []string {
	var out []string
	for _, a := range f.vpa.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" && p.GetPatchType() == types.MergePatchType {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

// events returns the pod events not returned before.
func (f *fixture) events() []string { return f.recorder.unread("Pod") }

// vpaEvents returns the VPA events not returned before.
func (f *fixture) vpaEvents() []string { return f.recorder.unread("VerticalPodAutoscaler") }

// getVPA reads a VPA from the API.
func (f *fixture) getVPA(name string) *vpatypes.VerticalPodAutoscaler {
	v, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return v
}

// condition returns the VPA's InPlaceResizeBlocked condition from the API.
func (f *fixture) condition(vpa string) *vpatypes.VerticalPodAutoscalerCondition {
	for _, c := range f.getVPA(vpa).Status.Conditions {
		if c.Type == condition.Type {
			return &c
		}
	}
	return nil
}

// waitCached waits until the controller's VPA cache satisfies ok.
func (f *fixture) waitCached(name string, ok func(*vpatypes.VerticalPodAutoscaler) bool) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		v, err := f.ctrl.vpas.VerticalPodAutoscalers("default").Get(name)
		return err == nil && ok(v)
	}, waitFor, 10*time.Millisecond)
}
