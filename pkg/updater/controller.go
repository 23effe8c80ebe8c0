// Package updater is the InPlace updater's controller: informers on pods and
// VPAs feed a rate-limited workqueue of pods; a worker reads the caches, lets
// pkg/resize decide, and acts: the one place that calls the API to resize.
//
// A recommendation travels: VPA informer event -> the VPA's pods are queued
// -> worker -> resize.Decide -> patch pods/resize -> the outcome is recorded
// (pkg/records) and reported: events on the pod and the VPA, metrics, and
// the VPA's InPlaceResizeBlocked condition (status.go), written by a second
// queue keyed by VPA. A third queue, keyed by Job, writes recommendations into
// the pod templates of suspended Jobs (jobs.go).
package updater

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/usage"
)

// Event reasons. Infeasible, Invalid, DeferredTooLong, MemoryLimitKept and
// MemoryLimitRefused go on the pod and on its VPA; the others on the pod
// only.
const (
	// EventResizeSent: a resize was sent to the pod's resize subresource.
	EventResizeSent = "InPlaceResizeSent"
	// EventResizeInfeasible: the resize cannot fit the node (kubelet
	// Infeasible, or 403 NodeCapacity); it is not retried until the
	// recommendation asks for less.
	EventResizeInfeasible = "InPlaceResizeInfeasible"
	// EventResizeInvalid: the change cannot be done in place; it is not
	// retried until the recommendation changes.
	EventResizeInvalid = "InPlaceResizeInvalid"
	// EventResizeDeferredTooLong: the kubelet has held the resize Deferred
	// for longer than --deferred-warning-after. The pod keeps waiting.
	EventResizeDeferredTooLong = "InPlaceResizeDeferredTooLong"
	// EventResizeWithheld: a resize is due but not sent (--dry-run, or
	// paused); once per pod and target.
	EventResizeWithheld = "InPlaceResizeWithheld"
	// EventMemoryLimitKept: memory limits are not lowered because the memory
	// in use, plus --memory-limit-decrease-margin, reaches the recommended
	// ones; the rest of the resize is sent. Once per memory record.
	EventMemoryLimitKept = "InPlaceResizeMemoryLimitKept"
	// EventMemoryLimitRefused: the kubelet refused to lower memory limits
	// below the memory in use; recorded, never sent again, and the resize is
	// sent once more with those limits kept. Once per memory record.
	EventMemoryLimitRefused = "InPlaceResizeMemoryLimitRefused"
)

const (
	// ownerIndex indexes pods by the UID of their controller.
	ownerIndex = "vpa-inplace/controller-uid"
	// customOwnerIndex indexes pods whose controller may be a custom
	// resource by that controller (target.Owner.Key): the pods of a VPA
	// whose target is a custom resource without /scale.
	customOwnerIndex = "vpa-inplace/custom-controller"
)

// Resolver finds VPAs for pods and Jobs, and pods for VPAs (pkg/target).
type Resolver interface {
	VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error)
	VPAForJob(ctx context.Context, job *batchv1.Job) (*vpatypes.VerticalPodAutoscaler, error)
	// Target tells how the VPA's pods are found: by label selector, or by
	// the custom resource that controls them.
	Target(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (target.Target, error)
	Forget(uid types.UID)
}

// Calculator computes what a pod's containers should get (pkg/recommendation).
type Calculator interface {
	ForPod(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (recommendation.Desired, error)
	// Forget drops what is remembered of a deleted VPA.
	Forget(vpaUID types.UID)
}

var (
	_ Resolver   = (*target.Resolver)(nil)
	_ Calculator = (*recommendation.Calculator)(nil)
	_ Calculator = (*recommendation.Memo)(nil)
)

// Config holds the updater's settings.
type Config struct {
	// Threshold is --pod-update-threshold.
	Threshold float64
	// EvictionTolerance is --eviction-tolerance: the fraction of a
	// workload's pods whose containers may be restarted by resizes at once.
	EvictionTolerance float64
	// RestartMinReady is --restart-min-ready: how long a pod restarted by a
	// resize must stay Ready before the next pod of its workload may go,
	// when the workload sets no minReadySeconds; 0 means 30s.
	RestartMinReady time.Duration
	// ResyncInterval is --updater-interval.
	ResyncInterval time.Duration
	// Workers is the number of concurrent workers.
	Workers int
	// IgnoredNamespaces are skipped.
	IgnoredNamespaces []string
	// ServerMinor is the API server's minor version, 0 when unknown.
	ServerMinor int
	// DryRun is --dry-run: decide and report, never send a resize.
	DryRun bool
	// DeferredWarningAfter is --deferred-warning-after: how long a resize may
	// stay Deferred before a warning event; 0 disables the warning.
	DeferredWarningAfter time.Duration
	// ConfigMap is the ConfigMap whose "paused" key pauses resizing
	// cluster-wide (read through Deps.ConfigMaps).
	ConfigMap types.NamespacedName
	// StatusMinInterval is the shortest time between two writes of one VPA's
	// condition; 0 means 10s, a negative value no limit.
	StatusMinInterval time.Duration
	// MemoryLimitMargin is --memory-limit-decrease-margin: with usage known,
	// a memory limit is lowered only above usage x (1 + margin).
	MemoryLimitMargin float64
}

const (
	defaultStatusMinInterval = 10 * time.Second
	// statusDelay lets the pods of a VPA settle before its condition is
	// computed: changes within it make one write.
	statusDelay = time.Second
)

// Deps are the controller's collaborators.
type Deps struct {
	Client kubernetes.Interface
	// VPAClient writes the VPA condition.
	VPAClient vpaclientset.Interface
	Pods      coreinformers.PodInformer
	VPAs      vpainformers.VerticalPodAutoscalerInformer
	// ConfigMaps watches the cluster-wide kill switch (Config.ConfigMap);
	// nil: no cluster-wide switch.
	ConfigMaps coreinformers.ConfigMapInformer
	// Jobs watches Jobs, whose pod templates get the recommendation while
	// suspended; nil: Jobs are not looked at.
	Jobs       batchinformers.JobInformer
	Resolver   Resolver
	Calculator Calculator
	Store      records.Store
	// MemoryRecords holds the memory records (memory limits not to lower);
	// nil: kept in memory only.
	MemoryRecords records.Store
	// PDBs watches PodDisruptionBudgets, consulted before a resize that
	// restarts containers; nil: only the eviction tolerance applies.
	PDBs policyinformers.PodDisruptionBudgetInformer
	// MinReady reads the workloads' minReadySeconds; its Default is set
	// from Config.RestartMinReady.
	MinReady disruption.MinReady
	// Usage tells the memory in use by containers (the metrics API); nil:
	// never known, the kubelet's check is the last line.
	Usage       usage.Source
	Recorder    record.EventRecorder
	FeatureGate featuregate.FeatureGate
	Now         func() time.Time
	// Metrics may be nil.
	Metrics *Metrics
}

// Controller is the InPlace updater.
type Controller struct {
	cfg        Config
	client     kubernetes.Interface
	vpaClient  vpaclientset.Interface
	pods       corelisters.PodLister
	podIdx     cache.Indexer
	vpas       vpalisters.VerticalPodAutoscalerLister
	configMaps corelisters.ConfigMapLister
	pdbs       policylisters.PodDisruptionBudgetLister
	jobs       batchlisters.JobLister
	jobIdx     cache.Indexer
	synced     []cache.InformerSynced
	resolver   Resolver
	calc       Calculator
	store      records.Store
	memStore   records.Store
	usage      usage.Source
	recorder   record.EventRecorder
	gate       featuregate.FeatureGate
	now        func() time.Time
	metrics    *Metrics
	ignored    sets.Set[string]
	// budget paces resizes that restart containers (restart.go).
	budget   *disruption.Budget
	minReady disruption.MinReady
	// queue holds pod keys; statusQueue VPA keys whose condition may need
	// writing; jobQueue Job keys.
	queue       workqueue.TypedRateLimitingInterface[string]
	statusQueue workqueue.TypedRateLimitingInterface[string]
	jobQueue    workqueue.TypedRateLimitingInterface[string]
	tracker     *tracker
	jobTracker  *jobTracker

	// started is set once Run has synced its caches, loaded the records
	// and starts its workers.
	started atomic.Bool
	// busy counts workers handling a pod.
	busy atomic.Int32

	mu sync.Mutex
	// recommendationSeen holds, per VPA UID, when the updater saw its
	// recommendation change (or first saw the VPA).
	recommendationSeen map[types.UID]time.Time
	// statusWritten holds, per VPA key, when its condition was last written.
	statusWritten map[string]time.Time
	// gateOffLogged holds the VPAs already reported as skipped because the
	// gate is off, so each is logged once.
	gateOffLogged sets.Set[types.UID]
}

// nowClock is an injected clock function as a clock.PassiveClock.
type nowClock func() time.Time

func (f nowClock) Now() time.Time                  { return f() }
func (f nowClock) Since(t time.Time) time.Duration { return f().Sub(t) }

// New builds a Controller and registers its event handlers.
func New(ctx context.Context, cfg Config, deps Deps) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if cfg.StatusMinInterval == 0 {
		cfg.StatusMinInterval = defaultStatusMinInterval
	}
	if cfg.RestartMinReady <= 0 {
		cfg.RestartMinReady = restartMinReadyDefault
	}
	deps.MinReady.Default = cfg.RestartMinReady
	if deps.MemoryRecords == nil {
		deps.MemoryRecords = records.NewInMemoryStore()
	}
	c := &Controller{
		cfg:       cfg,
		client:    deps.Client,
		vpaClient: deps.VPAClient,
		pods:      deps.Pods.Lister(),
		podIdx:    deps.Pods.Informer().GetIndexer(),
		vpas:      deps.VPAs.Lister(),
		synced:    []cache.InformerSynced{deps.Pods.Informer().HasSynced, deps.VPAs.Informer().HasSynced},
		resolver:  deps.Resolver,
		calc:      deps.Calculator,
		store:     deps.Store,
		memStore:  deps.MemoryRecords,
		usage:     deps.Usage,
		recorder:  deps.Recorder,
		gate:      deps.FeatureGate,
		now:       deps.Now,
		metrics:   deps.Metrics,
		ignored:   sets.New(cfg.IgnoredNamespaces...),
		budget:    disruption.New(cfg.EvictionTolerance, nowClock(deps.Now)),
		minReady:  deps.MinReady,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 5*time.Minute),
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-updater"},
		),
		statusQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-updater-status"},
		),
		jobQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-updater-jobs"},
		),
		tracker:            newTracker(),
		jobTracker:         newJobTracker(),
		recommendationSeen: map[types.UID]time.Time{},
		statusWritten:      map[string]time.Time{},
		gateOffLogged:      sets.New[types.UID](),
	}
	if deps.ConfigMaps != nil {
		c.configMaps = deps.ConfigMaps.Lister()
		// Fail closed: no resize before the kill switch has been read.
		c.synced = append(c.synced, deps.ConfigMaps.Informer().HasSynced)
	}
	podIndexers := cache.Indexers{ownerIndex: indexByController, customOwnerIndex: indexByCustomOwner, labelIndex: indexByLabel}
	if _, ok := deps.Pods.Informer().GetIndexer().GetIndexers()[cache.NamespaceIndex]; !ok {
		podIndexers[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	}
	if err := deps.Pods.Informer().AddIndexers(podIndexers); err != nil {
		return nil, fmt.Errorf("adding pod index: %w", err)
	}
	logger := klog.FromContext(ctx)
	if _, err := deps.Pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPod(logger, nil, obj) },
		UpdateFunc: func(old, obj any) { c.onPod(logger, old, obj) },
		DeleteFunc: func(obj any) { c.onPodDelete(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	if _, err := deps.VPAs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onVPA(ctx, nil, obj) },
		UpdateFunc: func(old, obj any) { c.onVPA(ctx, old, obj) },
		DeleteFunc: func(obj any) { c.onVPADelete(obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding VPA handler: %w", err)
	}
	if deps.Jobs != nil {
		c.jobs = deps.Jobs.Lister()
		c.jobIdx = deps.Jobs.Informer().GetIndexer()
		c.synced = append(c.synced, deps.Jobs.Informer().HasSynced)
		if err := deps.Jobs.Informer().AddIndexers(cache.Indexers{jobCronJobIndex: indexJobByCronJob}); err != nil {
			return nil, fmt.Errorf("adding Job index: %w", err)
		}
		if _, err := deps.Jobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onJob(logger, nil, obj) },
			UpdateFunc: func(old, obj any) { c.onJob(logger, old, obj) },
			DeleteFunc: func(obj any) { c.onJobDelete(logger, obj) },
		}); err != nil {
			return nil, fmt.Errorf("adding Job handler: %w", err)
		}
	}
	if deps.PDBs != nil {
		c.pdbs = deps.PDBs.Lister()
		c.synced = append(c.synced, deps.PDBs.Informer().HasSynced)
		if _, err := deps.PDBs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onPDB(nil, obj) },
			UpdateFunc: c.onPDB,
			DeleteFunc: func(obj any) { c.onPDB(nil, obj) },
		}); err != nil {
			return nil, fmt.Errorf("adding PodDisruptionBudget handler: %w", err)
		}
	}
	if deps.ConfigMaps != nil {
		if _, err := deps.ConfigMaps.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onConfigMap(ctx, nil, obj) },
			UpdateFunc: func(old, obj any) { c.onConfigMap(ctx, old, obj) },
			DeleteFunc: func(obj any) { c.onConfigMap(ctx, obj, nil) },
		}); err != nil {
			return nil, fmt.Errorf("adding ConfigMap handler: %w", err)
		}
	}
	c.metrics.bind(c.gaugeSnapshot)
	return c, nil
}

// gaugeSnapshot is read by the metrics at each scrape.
func (c *Controller) gaugeSnapshot() gaugeSnapshot {
	pending, oldest := c.tracker.pending(c.now())
	paused, _ := c.clusterPaused()
	metricsAPI := c.usage != nil && c.usage.Available()
	return gaugeSnapshot{records: c.store.Len(), memoryRecords: c.memStore.Len(), pending: pending, oldest: oldest,
		paused: paused, dryRun: c.cfg.DryRun, metricsAPI: metricsAPI, jobs: c.jobTracker.counts()}
}

func indexByController(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

func indexByCustomOwner(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if owner, ok := target.CustomOwnerOf(pod); ok {
		return []string{owner.Key()}, nil
	}
	return nil, nil
}

// HasSynced reports whether the informer caches have synced.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// Run starts the workers once the caches have synced and the records of
// earlier attempts are loaded, and blocks until ctx is cancelled; then it
// drains and returns.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	defer c.queue.ShutDown()
	defer c.statusQueue.ShutDown()
	defer c.jobQueue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("caches did not sync before shutdown")
	}
	// No decision before the records are known: a resize recorded as
	// infeasible before a restart or a change of leader is not sent again.
	if err := c.loadRecords(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	logger.Info("Caches synced and records loaded; starting workers", "workers", c.cfg.Workers,
		"resyncInterval", c.cfg.ResyncInterval, "dryRun", c.cfg.DryRun)
	// From here, VPA events resolve their pods; the first resync below
	// queues every pod anyway.
	c.started.Store(true)

	var wg sync.WaitGroup
	wg.Go(func() { c.store.Run(ctx) })
	wg.Go(func() { c.memStore.Run(ctx) })
	// The first resync queues every pod; later ones, every interval, catch
	// what events missed and clean up records of pods that are gone.
	c.Resync(ctx)
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	wg.Go(func() {
		// A condition counts the pods already decided: written before the
		// first pass over the pods, it would say "No pods." and be
		// rewritten moments later.
		c.waitFirstPass(ctx)
		for c.processNextStatus(ctx) {
		}
	})
	wg.Go(func() {
		for c.processNextJob(ctx) {
		}
	})
	wg.Go(func() {
		t := time.NewTicker(c.cfg.ResyncInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.Resync(ctx)
			}
		}
	})
	<-ctx.Done()
	c.queue.ShutDown()
	c.statusQueue.ShutDown()
	c.jobQueue.ShutDown()
	wg.Wait()
	logger.Info("Updater stopped")
	return nil
}

// loadRecords loads the stores, retrying with backoff until they succeed or
// ctx is cancelled.
func (c *Controller) loadRecords(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: time.Minute}
	for _, store := range []records.Store{c.store, c.memStore} {
		err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			if err := store.Load(ctx); err != nil {
				logger.Error(err, "Loading records; no resize is sent until they are loaded")
				return false, nil
			}
			return true, nil
		})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("loading records: %w", err)
		}
	}
	return nil
}

// Resync queues the pods, the Jobs and the condition of every InPlace VPA,
// and forgets records of pods and Jobs that no longer exist.
func (c *Controller) Resync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	vpas, err := c.vpas.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing VPAs for resync")
		return
	}
	for _, vpa := range vpas {
		if isInPlace(vpa) {
			c.enqueueVPAPods(ctx, vpa)
			c.enqueueVPAJobs(vpa)
		}
		if isInPlace(vpa) || hasCondition(vpa) {
			c.enqueueStatus(vpa)
		}
	}
	forgotten := c.CleanupRecords()
	if len(forgotten) > 0 {
		logger.V(2).Info("Forgot records of pods and Jobs that no longer exist", "count", len(forgotten))
	}
}

// CleanupRecords forgets the records (and memory records) of pods and Jobs
// that are no longer in the cache and returns the UIDs forgotten.
func (c *Controller) CleanupRecords() []types.UID {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	live := sets.New[types.UID](c.liveJobs()...)
	for _, p := range pods {
		live.Insert(p.UID)
	}
	c.memStore.Retain(live.Has)
	return c.store.Retain(live.Has)
}

// waitFirstPass returns once the pod queue is empty and no worker is busy
// (the pods queued by the first resync are decided), or ctx is done.
func (c *Controller) waitFirstPass(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.queue.Len() == 0 && c.busy.Load() == 0, nil
	})
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	c.busy.Add(1)
	defer c.busy.Add(-1)
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	klog.FromContext(ctx).V(2).Info("Will retry pod", "pod", key, "err", err, "retries", c.queue.NumRequeues(key))
	c.queue.AddRateLimited(key)
	return true
}

// sync handles one pod: read the caches, decide, act, report. A returned
// error is retried with backoff; permanent outcomes are recorded instead.
func (c *Controller) sync(ctx context.Context, key string) error {
	start := c.now()
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key of ours; never retried
	}
	pod, err := c.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading pod from cache: %w", err)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KObj(pod))
	ctx = klog.NewContext(ctx, logger)

	vpa, err := c.resolver.VPAForPod(ctx, pod)
	if err != nil {
		return fmt.Errorf("finding the pod's VPA: %w", err)
	}
	if vpa == nil || !isInPlace(vpa) {
		c.untrack(pod.UID)
		return nil
	}
	if !c.gate.Enabled(features.InPlace) {
		c.logGateOffOnce(logger, vpa)
		c.untrack(pod.UID)
		return nil
	}
	cachedVersion := pod.ResourceVersion
	if behind, overdue := c.tracker.cacheLag(pod.UID, cachedVersion, start); behind {
		// Queued again (a resync, another event) before the cache saw the
		// resize sent: never send it twice.
		if !overdue {
			logger.V(4).Info("Cache has not seen the resize sent yet; waiting for the pod's update")
			return nil
		}
		// The watch has lagged for long: decide on the pod as the API
		// server has it (one read) rather than on the cache.
		live, err := c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // its delete event untracks it
		}
		if err != nil {
			return fmt.Errorf("reading pod from the API server (the cache has not seen the resize sent): %w", err)
		}
		c.metrics.staleCacheRead()
		logger.V(2).Info("Cache has not seen the resize sent; deciding on the pod read from the API server", "cachedVersion", pod.ResourceVersion, "resourceVersion", live.ResourceVersion)
		pod = live
	}
	c.observeRestart(ctx, pod)

	status := resize.ReadStatus(pod)
	desired, err := c.calc.ForPod(pod, vpa)
	if err != nil {
		c.report(ctx, pod, vpa, podStatus{state: PodError, message: "cannot compute what the pod should get: " + err.Error()}, status)
		return fmt.Errorf("computing recommendation: %w", err)
	}
	record, _ := c.store.Get(pod.UID)
	memRecord, _ := c.memStore.Get(pod.UID)
	in := resize.Input{
		Pod:               pod,
		Desired:           desired,
		Record:            record,
		Threshold:         c.cfg.Threshold,
		ServerMinor:       c.cfg.ServerMinor,
		DisruptionAllowed: true,
		MemoryRecord:      memRecord,
		MemoryLimitMargin: c.cfg.MemoryLimitMargin,
	}
	if c.usage != nil && resize.NeedsMemoryUsage(pod, desired, c.cfg.ServerMinor) {
		// Never blocks a resize: without usage, memory limits are lowered
		// as recommended and the kubelet's own check is the last line.
		u, err := c.usage.MemoryUsage(ctx, pod)
		if err != nil {
			logger.V(2).Info("Memory in use unknown; a memory limit is lowered without it", "err", err)
		}
		in.MemoryUsage = u
	}
	d := resize.Decide(in)
	var waiting *disruption.Verdict
	if reason, _ := c.withheld(vpa); d.Action == resize.ActionPatch && d.Disruptive && reason == "" {
		// Check and reservation in one step, before the resize is sent.
		if v := c.reserveRestart(pod); !v.Allowed {
			in.DisruptionAllowed, in.DisruptionRefused = false, v.Blocker+": "+v.Message
			d, waiting = resize.Decide(in), &v
		}
	}
	c.metrics.decided(d, c.now().Sub(start))
	outcome, _ := c.tracker.settle(pod.UID, status.State, func(like resources.Resources) resources.Resources { return resize.Current(pod, like) })
	c.metrics.settled(outcome)
	logger.V(2).Info("Decided", "vpa", klog.KObj(vpa), "action", d.Action, "reason", d.Reason, "message", d.Message)
	st, err := c.act(ctx, pod, cachedVersion, vpa, d, status)
	if st != nil && waiting != nil {
		st.values = waiting.Blocker
	}
	if st != nil {
		c.report(ctx, pod, vpa, *st, status)
	}
	if waiting != nil {
		c.waitForBudget(pod, *waiting)
	}
	return err
}

// act carries out a decision and returns the pod's resulting state (nil
// when the pod is gone). cachedVersion is the pod's version in the cache
// (pod may have been read from the API server instead).
func (c *Controller) act(ctx context.Context, pod *corev1.Pod, cachedVersion string, vpa *vpatypes.VerticalPodAutoscaler, d resize.Decision, rs resize.Status) (*podStatus, error) {
	logger := klog.FromContext(ctx)
	owner := ownerOf(vpa)
	if d.ClearRecord {
		c.store.Delete(pod.UID)
	}
	if d.NewRecord != nil {
		d.NewRecord.RecordedAt = c.now()
		c.store.Put(owner, pod.UID, d.NewRecord)
		c.reportRecord(ctx, pod, vpa, d.NewRecord)
	}
	if d.NewMemoryRecord != nil {
		d.NewMemoryRecord.RecordedAt = c.now()
		c.memStore.Put(owner, pod.UID, d.NewMemoryRecord)
		c.reportMemoryRecord(ctx, pod, vpa, d)
	}
	if d.Action != resize.ActionPatch {
		record, _ := c.store.Get(pod.UID)
		memRecord, _ := c.memStore.Get(pod.UID)
		st := stateOf(d, record, memRecord, rs)
		return &st, nil
	}

	if reason, why := c.withheld(vpa); reason != "" {
		c.metrics.withheldResize(reason)
		logger.V(2).Info("Resize not sent", "target", d.Target.String(), "why", why)
		return &podStatus{state: PodWithheld, values: d.Target.String(), message: why}, nil
	}

	patched, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, d.Patch, metav1.PatchOptions{}, "resize")
	outcome := resize.ClassifyPatchError(err)
	c.metrics.patched(outcome)
	if outcome != resize.OutcomeAccepted && d.Disruptive {
		// Nothing restarts: the reservation goes back.
		c.budget.Release(pod.UID)
	}
	switch outcome {
	case resize.OutcomeAccepted:
		c.store.Delete(pod.UID)
		if d.ClearMemoryRecord {
			c.memStore.Delete(pod.UID)
		}
		now := c.now()
		c.tracker.markSent(pod.UID, vpaKey(vpa), pod.Name, d.Target, now)
		// A patch that changed nothing brings no update event.
		if patched == nil || patched.ResourceVersion != pod.ResourceVersion {
			sentVersion := ""
			if patched != nil {
				sentVersion = patched.ResourceVersion
			}
			c.tracker.awaitUpdate(pod.UID, cachedVersion, sentVersion, now)
		}
		c.mu.Lock()
		seen, ok := c.recommendationSeen[vpa.UID]
		c.mu.Unlock()
		if ok {
			c.metrics.recommendationApplied(now.Sub(seen))
		}
		message := "resize sent"
		if len(d.Held) > 0 {
			message += "; " + resize.DescribeHeld(d.Held)
		}
		logger.Info("Resize sent", "target", d.Target.String(), "disruptive", d.Disruptive, "reason", d.Reason, "kept", resize.DescribeHeld(d.Held))
		if len(d.Held) > 0 {
			c.recorder.Eventf(pod, corev1.EventTypeNormal, EventResizeSent, "Resizing in place to %s; %s", d.Target.String(), resize.DescribeHeld(d.Held))
		} else {
			c.recorder.Eventf(pod, corev1.EventTypeNormal, EventResizeSent, "Resizing in place to %s", d.Target.String())
		}
		return &podStatus{state: PodInProgress, since: now, values: d.Target.String(), message: message}, nil
	case resize.OutcomeNodeCapacity, resize.OutcomeInvalid:
		kind, state := records.KindNodeCapacity, PodInfeasible
		if outcome == resize.OutcomeInvalid {
			kind, state = records.KindInvalid, PodInvalid
		}
		r := &records.Record{Kind: kind, Attempted: d.Target, Message: statusMessage(err), RecordedAt: c.now()}
		c.store.Put(owner, pod.UID, r)
		c.reportRecord(ctx, pod, vpa, r)
		return &podStatus{state: state, since: r.RecordedAt, values: r.Attempted.String(), message: r.Message, kind: r.Kind}, nil
	case resize.OutcomeGone:
		c.untrack(pod.UID)
		return nil, nil
	default:
		err = fmt.Errorf("resize patch (%s): %w", outcome, err)
		return &podStatus{state: PodError, message: err.Error()}, err
	}
}

func statusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

func ownerOf(vpa *vpatypes.VerticalPodAutoscaler) records.Owner {
	return records.Owner{Namespace: vpa.Namespace, Name: vpa.Name, UID: vpa.UID}
}

func vpaKey(vpa *vpatypes.VerticalPodAutoscaler) string {
	return vpa.Namespace + "/" + vpa.Name
}

// report remembers a pod's state, queues its VPA's condition when it
// changed, and warns once about a resize Deferred for too long.
func (c *Controller) report(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, st podStatus, rs resize.Status) {
	st.vpa, st.name = vpaKey(vpa), pod.Name
	now := c.now()
	for _, key := range c.tracker.set(pod.UID, st, now) {
		c.statusQueue.AddAfter(key, statusDelay)
	}
	switch st.state {
	case PodWithheld:
		if c.tracker.withheldOnce(pod.UID, st.values) {
			c.recorder.Eventf(pod, corev1.EventTypeNormal, EventResizeWithheld, "Would resize in place to %s; not sent: %s", st.values, st.message)
		}
	case PodDeferred:
		c.warnDeferred(ctx, pod, vpa, rs)
	}
}

// warnDeferred sends, once per Deferred episode, a warning on the pod and
// its VPA when the kubelet has held the resize for --deferred-warning-after,
// and otherwise looks at the pod again when that time comes. The episode
// starts at the PodResizePending condition's lastTransitionTime (or, without
// one, when the updater first saw the pod deferred).
func (c *Controller) warnDeferred(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, rs resize.Status) {
	after := c.cfg.DeferredWarningAfter
	if after <= 0 {
		return
	}
	since, ok := c.tracker.since(pod.UID)
	if !ok {
		return
	}
	age := c.now().Sub(since)
	if age < after {
		c.queue.AddAfter(pod.Namespace+"/"+pod.Name, after-age)
		return
	}
	if !c.tracker.warnOnce(pod.UID, since) {
		return
	}
	waited := age.Round(time.Second)
	klog.FromContext(ctx).Info("Resize deferred for too long; still waiting, the pod is not evicted", "vpa", klog.KObj(vpa), "since", since, "waited", waited)
	c.recorder.Eventf(pod, corev1.EventTypeWarning, EventResizeDeferredTooLong,
		"Resize deferred by the kubelet for %s (since %s): %s; still waiting, the pod is not evicted",
		waited, since.UTC().Format(time.RFC3339), rs.Message)
	c.recorder.Eventf(vpa, corev1.EventTypeWarning, EventResizeDeferredTooLong,
		"Pod %s: resize deferred by the kubelet for %s (since %s): %s; still waiting, the pod is not evicted",
		pod.Name, waited, since.UTC().Format(time.RFC3339), rs.Message)
}

// untrack forgets a pod's state and queues its VPA's condition.
func (c *Controller) untrack(uid types.UID) {
	if key, ok := c.tracker.forget(uid); ok {
		c.statusQueue.AddAfter(key, statusDelay)
	}
}

// reportRecord logs and emits the events, on the pod and on its VPA, for a
// newly recorded outcome.
func (c *Controller) reportRecord(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, r *records.Record) {
	reason := EventResizeInfeasible
	what := "infeasible"
	if r.Kind == records.KindInvalid {
		reason, what = EventResizeInvalid, "not possible in place"
	}
	klog.FromContext(ctx).Info("Resize recorded as "+what, "vpa", klog.KObj(vpa), "kind", r.Kind, "attempted", r.Attempted.String(), "message", r.Message)
	c.recorder.Eventf(pod, corev1.EventTypeWarning, reason,
		"Resize to %s is %s (%s: %s); not retried until the recommendation changes", r.Attempted.String(), what, r.Kind, r.Message)
	c.recorder.Eventf(vpa, corev1.EventTypeWarning, reason,
		"Pod %s: resize to %s is %s (%s: %s); not retried until the recommendation changes", pod.Name, r.Attempted.String(), what, r.Kind, r.Message)
}

// reportMemoryRecord logs, counts and emits the events, on the pod and on
// its VPA, for a new memory record.
func (c *Controller) reportMemoryRecord(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, d resize.Decision) {
	r := d.NewMemoryRecord
	c.metrics.memoryLimitsHeld(r.Kind)
	klog.FromContext(ctx).Info("Memory limits not lowered", "vpa", klog.KObj(vpa), "kind", r.Kind, "notBelow", r.Attempted.String(),
		"message", r.Message, "kept", resize.DescribeHeld(d.Held))
	rest := "nothing else to resize"
	if d.Action == resize.ActionPatch {
		rest = "the rest of the resize is sent"
	}
	var reason, what string
	switch r.Kind {
	case records.KindMemoryLimitRefused:
		reason = EventMemoryLimitRefused
		what = fmt.Sprintf("the kubelet refused to lower memory limits to %s (%s); these limits and lower ones are not sent again, and the resize is sent once more with the running memory limits kept",
			r.Attempted.String(), r.Message)
	default:
		reason = EventMemoryLimitKept
		what = fmt.Sprintf("memory limits not lowered below the memory in use plus the margin: %s; %s", resize.DescribeHeld(d.Held), rest)
	}
	c.recorder.Eventf(pod, corev1.EventTypeWarning, reason, "%s", capitalize(what))
	c.recorder.Eventf(vpa, corev1.EventTypeWarning, reason, "Pod %s: %s", pod.Name, what)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (c *Controller) logGateOffOnce(logger klog.Logger, vpa *vpatypes.VerticalPodAutoscaler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gateOffLogged.Has(vpa.UID) {
		return
	}
	c.gateOffLogged.Insert(vpa.UID)
	logger.Info("Skipping VPA in InPlace mode: the InPlace feature gate is off (start the updater with --feature-gates=InPlace=true)", "vpa", klog.KObj(vpa))
}

// onPod queues a pod when something the decision depends on changed.
func (c *Controller) onPod(logger klog.Logger, oldObj, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || c.ignored.Has(pod.Namespace) {
		return
	}
	if oldObj != nil {
		if old, ok := oldObj.(*corev1.Pod); ok && !relevantPodChange(old, pod) {
			return
		}
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		logger.Error(err, "Cannot key pod")
		return
	}
	c.queue.Add(key)
}

// relevantPodChange reports whether an update may change a decision: the
// spec's resources, the resize status, readiness, phase or generation.
func relevantPodChange(old, pod *corev1.Pod) bool {
	if old.ResourceVersion == pod.ResourceVersion {
		return false
	}
	if old.Generation != pod.Generation || old.Status.ObservedGeneration != pod.Status.ObservedGeneration ||
		old.Status.Phase != pod.Status.Phase || isReady(old) != isReady(pod) ||
		old.Status.Resize != pod.Status.Resize || //nolint:staticcheck // tolerated legacy field
		(old.DeletionTimestamp == nil) != (pod.DeletionTimestamp == nil) {
		return true
	}
	if !apiequality.Semantic.DeepEqual(resizeConditions(old), resizeConditions(pod)) {
		return true
	}
	for i := range pod.Spec.Containers {
		if i >= len(old.Spec.Containers) || !apiequality.Semantic.DeepEqual(old.Spec.Containers[i].Resources, pod.Spec.Containers[i].Resources) {
			return true
		}
	}
	return !apiequality.Semantic.DeepEqual(containerResources(old), containerResources(pod))
}

func resizeConditions(p *corev1.Pod) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			c.LastProbeTime, c.LastTransitionTime = metav1.Time{}, metav1.Time{}
			out = append(out, c)
		}
	}
	return out
}

func containerResources(p *corev1.Pod) []any {
	out := make([]any, 0, 2*len(p.Status.ContainerStatuses))
	for _, s := range p.Status.ContainerStatuses {
		out = append(out, s.AllocatedResources, s.Resources)
	}
	return out
}

func (c *Controller) onPodDelete(logger klog.Logger, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if c.store.Delete(pod.UID) {
		logger.V(4).Info("Forgot record of deleted pod", "pod", klog.KObj(pod))
	}
	if c.memStore.Delete(pod.UID) {
		logger.V(4).Info("Forgot memory record of deleted pod", "pod", klog.KObj(pod))
	}
	c.untrack(pod.UID)
	c.budget.Forget(pod.UID)
}

// onVPA queues the VPA's condition, and its pods when its recommendation,
// spec or pause annotation changed.
func (c *Controller) onVPA(ctx context.Context, oldObj, obj any) {
	vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok || c.ignored.Has(vpa.Namespace) {
		return
	}
	old, isUpdate := oldObj.(*vpatypes.VerticalPodAutoscaler)
	switch {
	case isInPlace(vpa) || hasCondition(vpa):
	case isUpdate && isInPlace(old):
	default:
		return
	}
	// Every change, including a recommender's status write that dropped or
	// reverted the condition, is checked against what the condition should
	// say; an unchanged condition is not written.
	c.enqueueStatus(vpa)
	newRecommendation := !isUpdate || !apiequality.Semantic.DeepEqual(old.Status.Recommendation, vpa.Status.Recommendation)
	if isUpdate && !newRecommendation &&
		apiequality.Semantic.DeepEqual(old.Spec, vpa.Spec) &&
		old.Annotations[PausedAnnotation] == vpa.Annotations[PausedAnnotation] {
		return
	}
	if newRecommendation {
		c.mu.Lock()
		c.recommendationSeen[vpa.UID] = c.now()
		c.mu.Unlock()
	}
	c.enqueueVPAPods(ctx, vpa)
	c.enqueueVPAJobs(vpa)
	if isUpdate && old.Spec.TargetRef != nil && !apiequality.Semantic.DeepEqual(old.Spec.TargetRef, vpa.Spec.TargetRef) {
		// The Jobs it no longer targets are looked at again.
		c.enqueueVPAJobs(old)
	}
}

func (c *Controller) onVPADelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok {
		return
	}
	c.resolver.Forget(vpa.UID)
	c.calc.Forget(vpa.UID)
	// The VPA's records went with its annotations.
	c.store.ForgetOwner(ownerOf(vpa))
	c.memStore.ForgetOwner(ownerOf(vpa))
	c.tracker.forgetVPA(vpaKey(vpa))
	c.jobTracker.forgetVPA(vpaKey(vpa))
	c.enqueueVPAJobs(vpa)
	c.mu.Lock()
	c.gateOffLogged.Delete(vpa.UID)
	delete(c.recommendationSeen, vpa.UID)
	delete(c.statusWritten, vpaKey(vpa))
	c.mu.Unlock()
}

// onConfigMap reacts to the cluster-wide kill switch: when it flips, every
// InPlace VPA's pods and condition are looked at again.
func (c *Controller) onConfigMap(ctx context.Context, oldObj, obj any) {
	if t, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
		oldObj = t.Obj
	}
	value := func(o any) (string, bool) {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Namespace != c.cfg.ConfigMap.Namespace || cm.Name != c.cfg.ConfigMap.Name {
			return "", false
		}
		v, ok := cm.Data[PausedKey]
		return v, ok
	}
	before, hadBefore := value(oldObj)
	after, hasAfter := value(obj)
	if before == after && hadBefore == hasAfter {
		return
	}
	paused, why := c.clusterPaused()
	klog.FromContext(ctx).Info("Cluster-wide kill switch changed", "configMap", c.cfg.ConfigMap, "paused", paused, "why", why)
	c.Resync(ctx)
}

func (c *Controller) enqueueVPAPods(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) {
	// Before Run starts the workers, the informers of the targets may not
	// have synced: resolving now would find no target. Run's first resync
	// queues every pod.
	if c.ignored.Has(vpa.Namespace) || !c.started.Load() {
		return
	}
	logger := klog.FromContext(ctx)
	t, err := c.resolver.Target(ctx, vpa)
	if err != nil {
		logger.V(2).Info("Cannot find the VPA's pods", "vpa", klog.KObj(vpa), "err", err)
		return
	}
	var keys []string
	switch {
	case t.Owner != nil:
		keys, err = c.podIdx.IndexKeys(customOwnerIndex, t.Owner.Key())
	case t.Selector == nil:
		logger.V(2).Info("Cannot find the VPA's pods: its target has neither selector nor owner", "vpa", klog.KObj(vpa))
		return
	default:
		var pods []*corev1.Pod
		pods, err = selectPods(c.podIdx, vpa.Namespace, t.Selector)
		for _, p := range pods {
			keys = append(keys, vpa.Namespace+"/"+p.Name)
		}
	}
	if err != nil {
		logger.Error(err, "Listing the VPA's pods from the cache", "vpa", klog.KObj(vpa), "target", t.String())
		return
	}
	for _, key := range keys {
		c.enqueuePod(key)
	}
}

// enqueuePod queues a pod unless it waits out a backoff after a failure:
// its retry is already due then, and a resync or a VPA event must not send
// a resize the API server keeps refusing sooner than the backoff says.
func (c *Controller) enqueuePod(key string) {
	if c.queue.NumRequeues(key) > 0 {
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueStatus(vpa *vpatypes.VerticalPodAutoscaler) {
	if c.ignored.Has(vpa.Namespace) {
		return
	}
	c.statusQueue.AddAfter(vpaKey(vpa), statusDelay)
}

func isInPlace(vpa *vpatypes.VerticalPodAutoscaler) bool {
	return vpa.Spec.UpdatePolicy != nil && vpa.Spec.UpdatePolicy.UpdateMode != nil &&
		*vpa.Spec.UpdatePolicy.UpdateMode == vpatypes.UpdateModeInPlace
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
