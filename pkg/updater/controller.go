// Package updater wires the InPlace updater: informers on pods and VPAs
// feed rate-limited workqueues; workers read the caches, let pkg/resize
// decide, and act: the one place that calls the API to resize a pod.
//
// A recommendation travels: VPA informer event -> the VPA's pods are queued
// -> worker -> resize.Decide -> patch pods/resize -> the outcome is recorded
// (pkg/records) and reported: events on the pod and the VPA, metrics
// (report), and the VPA's InPlaceResizeBlocked condition, written by the
// condition sub-controller from a queue keyed by VPA. A queue keyed by Job
// feeds the jobtemplate sub-controller, which writes recommendations into
// the pod templates of suspended Jobs. The states of pods and Jobs live in
// one tracker each (state).
package updater

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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
	"k8s.io/utils/clock"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/canary"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/jobtemplate"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/observe"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/preemption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
	uwindow "github.com/vpa-inplace/vpa-inplace/pkg/updater/window"
	"github.com/vpa-inplace/vpa-inplace/pkg/usage"
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
	// Checkpoints reads the recommender's checkpoints: how much usage a
	// recommendation rests on (evidence.go); nil: only the VPA tells.
	Checkpoints vpainformers.VerticalPodAutoscalerCheckpointInformer
	// Namespaces watches the namespaces' resize windows and freezes
	// (windows.go); nil: only the VPAs' own are read.
	Namespaces coreinformers.NamespaceInformer
	// Jobs watches Jobs, whose pod templates get the recommendation while
	// suspended; nil: Jobs are not looked at.
	Jobs       batchinformers.JobInformer
	Resolver   Resolver
	Calculator Calculator
	Store      records.Store
	// MemoryRecords holds the memory records (memory limits not to lower);
	// nil: kept in memory only.
	MemoryRecords records.Store
	// SafetyRecords holds the records of the watch after a resize
	// (canaries, reverts due, holds); nil: kept in memory only.
	SafetyRecords records.Store
	// JVMRecords holds the memory limits JVMs started with (jvm.go); nil:
	// kept in memory only.
	JVMRecords records.Store
	// Nodes watches Nodes, for the resizes sent only when they fit
	// (ResizeWhenAnnotation); nil: every resize is sent.
	Nodes coreinformers.NodeInformer
	// NodePods watches every pod bound to a node, of every namespace, for
	// those resizes: what they read of a pod (cachetrim.NodeView) is
	// enough. nil: Pods, which must then see every namespace.
	NodePods coreinformers.PodInformer
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
	// Clock is the one clock of decisions, workqueue delays and the
	// resync; nil: the real clock.
	Clock clock.WithTicker
	// Metrics may be nil.
	Metrics *report.Metrics
	// Fence passes every write for a pod or a Job (lifecycle.go); nil:
	// every write goes.
	Fence Fence
	// NodeRoom reserves the room of fits-node resizes through the API,
	// shared with the controllers of the other spans of shards and the
	// other replicas (capacity.go); nil: the in-process ledger alone
	// guards a node's room, as with one shard.
	NodeRoom SharedRoom
	// QueueMetrics gives the metrics of each work queue, by the queue's
	// name (pod, vpa, condition, job): client-go's workqueue metrics
	// (lifecycle.go). nil: none, and nothing measured.
	QueueMetrics func(queue string) workqueue.MetricsProvider
}

// Controller is the InPlace updater.
type Controller struct {
	cfg       Config
	client    kubernetes.Interface
	vpaClient vpaclientset.Interface
	pods      corelisters.PodLister
	podIdx    cache.Indexer
	vpas      vpalisters.VerticalPodAutoscalerLister
	// configMaps is the cache of the kill switch's ConfigMap, read by
	// key: its absence, the default, is answered without an error value.
	configMaps   cache.Indexer
	configMapKey string
	pdbs         policylisters.PodDisruptionBudgetLister
	nodes        corelisters.NodeLister
	// nodePodIdx indexes by node the pods bound to nodes (Deps.NodePods).
	nodePodIdx cache.Indexer
	jobs       batchlisters.JobLister
	jobIdx     cache.Indexer
	synced     []cache.InformerSynced
	resolver   Resolver
	calc       Calculator
	store      records.Store
	memStore   records.Store
	// jvmStore holds the memory limits JVMs started with (jvm.go).
	jvmStore records.Store
	// safetyStore holds the safety records; canaries and watcher are the
	// gate of decreases and the watch after a resize (safety.go).
	safetyStore records.Store
	canaries    *canary.Gate
	watcher     *observe.Watcher
	usage       usage.Source
	recorder    record.EventRecorder
	gate        featuregate.FeatureGate
	clock       clock.WithTicker
	now         func() time.Time
	metrics     *report.Metrics
	ignored     sets.Set[string]
	// checkpoints indexes the recommender's checkpoints by VPA
	// (evidence.go); nil without them.
	checkpoints cache.Indexer
	// windows reads the VPAs' resize windows and freezes (windows.go).
	windows *uwindow.Gate
	// budget paces resizes that restart containers (restart.go).
	budget   *disruption.Budget
	minReady disruption.MinReady
	// room holds the node room of resizes sent and not yet in the cache
	// (capacity.go); nil without a node cache.
	room *noderoom.Ledger
	// roomSeenByPods: the ledger reads the pods' own cache, whose update
	// handler (onPod) ends the holds it shows; otherwise the cache of the
	// pods bound to nodes does (watchNodePods).
	roomSeenByPods bool
	// shared reserves the room of fits-node resizes across replicas
	// (Deps.NodeRoom); nil without shards.
	shared SharedRoom
	// preempted holds the pods the scheduler preempted on the nodes of
	// Deferred resizes (preempted.go).
	preempted *preemption.Ledger
	// gates are the rules a pod's resize meets, in their order (gates.go).
	gates *gate.Chain[*attempt]
	// queue holds pod keys; vpaQueue VPA keys whose pods and Jobs are to be
	// queued (and killSwitchKey); statusQueue VPA keys whose condition may
	// need writing; jobQueue Job keys.
	queue       workqueue.TypedRateLimitingInterface[string]
	vpaQueue    workqueue.TypedRateLimitingInterface[string]
	statusQueue workqueue.TypedRateLimitingInterface[string]
	jobQueue    workqueue.TypedRateLimitingInterface[string]
	// tracker holds the states of pods; jobTracker of suspended Jobs.
	tracker    *state.Tracker[state.PodState]
	jobTracker *state.Tracker[state.JobState]
	// jobTemplates writes recommendations into suspended Jobs' templates,
	// one Job key of jobQueue at a time.
	jobTemplates *jobtemplate.Controller
	// conditions writes the VPA condition, one VPA key of statusQueue at a
	// time.
	conditions *condition.Controller

	// started is set once Run has synced its caches, loaded the records
	// and starts its workers.
	started atomic.Bool
	// busy counts workers handling a pod.
	busy atomic.Int32
	// loading is set while Run loads the records.
	loading atomic.Bool
	// recordsLoaded is set once Run has loaded the records: no pod or Job
	// is decided before (errRecordsNotLoaded).
	recordsLoaded atomic.Bool

	mu sync.Mutex
	// recommendationSeen holds, per VPA UID, when the updater saw its
	// recommendation change (or first saw the VPA).
	recommendationSeen map[types.UID]time.Time
	// gateOffLogged holds the VPAs already reported as skipped because the
	// gate is off, so each is logged once.
	gateOffLogged sets.Set[types.UID]
	// safetyWarned holds, per VPA UID, the last problem of its safety
	// annotations that was reported.
	safetyWarned map[types.UID]string
	// jvmWarned holds, per VPA UID, the last problem of its JVM annotation
	// that was reported (jvm.go).
	jvmWarned map[string]string
	// goneHarms holds, per VPA key, harm deleted pods showed, for the VPA
	// queue's worker.
	goneHarms map[string][]goneHarm
	// initIgnored holds the VPAs already reported as recommending for init
	// containers that are not sidecars (sidecars.go).
	initIgnored initIgnored

	// fence passes the writes (lifecycle.go); handlers are the event
	// handlers added, and unbind unbinds the gauges: Close undoes both.
	fence    Fence
	handlers []handlerRegistration
	unbind   func()
	// unsubscribe ends the subscription to the shared node room
	// (Deps.NodeRoom); nil without.
	unsubscribe func()
}

// New builds a Controller and registers its event handlers.
func New(ctx context.Context, cfg Config, deps Deps) (_ *Controller, err error) {
	cfg.setDefaults()
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	deps.MinReady.Default = cfg.RestartMinReady
	if deps.MemoryRecords == nil {
		deps.MemoryRecords = records.NewInMemoryStore()
	}
	if deps.SafetyRecords == nil {
		deps.SafetyRecords = records.NewInMemoryStore()
	}
	if deps.JVMRecords == nil {
		deps.JVMRecords = records.NewInMemoryStore()
	}
	c := &Controller{
		cfg:         cfg,
		client:      deps.Client,
		vpaClient:   deps.VPAClient,
		pods:        deps.Pods.Lister(),
		podIdx:      deps.Pods.Informer().GetIndexer(),
		vpas:        deps.VPAs.Lister(),
		synced:      []cache.InformerSynced{deps.Pods.Informer().HasSynced, deps.VPAs.Informer().HasSynced},
		resolver:    deps.Resolver,
		calc:        deps.Calculator,
		store:       deps.Store,
		memStore:    deps.MemoryRecords,
		safetyStore: deps.SafetyRecords,
		jvmStore:    deps.JVMRecords,
		canaries:    canary.New(canary.Config{HarmHold: cfg.HarmHold}, canaryRecords{deps.SafetyRecords}, deps.Clock),
		watcher:     observe.New(observe.Config{NotReadyGrace: cfg.NotReadyGrace}, deps.Clock),
		usage:       deps.Usage,
		recorder:    deps.Recorder,
		gate:        deps.FeatureGate,
		clock:       deps.Clock,
		now:         deps.Clock.Now,
		metrics:     deps.Metrics,
		ignored:     sets.New(cfg.IgnoredNamespaces...),
		budget:      disruption.New(disruption.Config{Tolerance: cfg.EvictionTolerance, Timeout: cfg.RestartReservationTimeout}, deps.Clock),
		preempted:   preemption.New(deps.Clock),
		minReady:    deps.MinReady,
		fence:       deps.Fence,
		shared:      deps.NodeRoom,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 5*time.Minute),
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-updater", Clock: deps.Clock, MetricsProvider: deps.queueMetrics(queuePod)},
		),
		vpaQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-updater-vpas", Clock: deps.Clock, MetricsProvider: deps.queueMetrics(queueVPA)},
		),
		statusQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-updater-status", Clock: deps.Clock, MetricsProvider: deps.queueMetrics(queueCondition)},
		),
		jobQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-updater-jobs", Clock: deps.Clock, MetricsProvider: deps.queueMetrics(queueJob)},
		),
		tracker:            state.New[state.PodState](),
		jobTracker:         state.New[state.JobState](),
		recommendationSeen: map[types.UID]time.Time{},
		gateOffLogged:      sets.New[types.UID](),
		safetyWarned:       map[types.UID]string{},
		goneHarms:          map[string][]goneHarm{},
	}
	// A controller not built stops its queues (and their metrics).
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	c.conditions = condition.New(condition.Config{MinInterval: cfg.StatusMinInterval}, condition.Deps{
		VPAs:    c.vpas,
		Client:  deps.VPAClient,
		Source:  c.conditionSummary,
		Clock:   deps.Clock,
		Requeue: func(key string, after time.Duration) { c.statusQueue.AddAfter(key, after) },
	})
	if c.gates, err = c.podGates(); err != nil {
		return nil, fmt.Errorf("listing the gates of resizes: %w", err)
	}
	if err := c.watchNamespaces(deps.Namespaces); err != nil {
		return nil, err
	}
	if err := c.readCheckpoints(deps.Checkpoints); err != nil {
		return nil, err
	}
	if deps.ConfigMaps != nil {
		c.configMaps = deps.ConfigMaps.Informer().GetIndexer()
		c.configMapKey = cfg.ConfigMap.String()
		// Fail closed: no resize before the kill switch has been read.
		c.synced = append(c.synced, deps.ConfigMaps.Informer().HasSynced)
	}
	podIndexers := cache.Indexers{ownerIndex: indexByController, customOwnerIndex: indexByCustomOwner, labelIndex: indexByLabel, uidIndex: indexByUID, nodeIndex: indexByNode}
	if _, ok := deps.Pods.Informer().GetIndexer().GetIndexers()[cache.NamespaceIndex]; !ok {
		podIndexers[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	}
	if err := addIndexers(deps.Pods.Informer(), podIndexers); err != nil {
		return nil, fmt.Errorf("adding pod index: %w", err)
	}
	logger := klog.FromContext(ctx)
	if err := c.handle(deps.Pods.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPod(logger, nil, obj) },
		UpdateFunc: func(old, obj any) { c.onPod(logger, old, obj) },
		DeleteFunc: func(obj any) { c.onPodDelete(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	if err := c.handle(deps.VPAs.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onVPA(nil, obj) },
		UpdateFunc: c.onVPA,
		DeleteFunc: func(obj any) { c.onVPADelete(obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding VPA handler: %w", err)
	}
	jobDeps := jobtemplate.Deps{
		Client: deps.Client, Resolver: deps.Resolver, Calculator: deps.Calculator, Store: deps.Store, Tracker: c.jobTracker,
		Recorder: deps.Recorder, Gate: deps.FeatureGate, Metrics: deps.Metrics, Clock: deps.Clock,
		Enqueue: func(key string) { c.jobQueue.Add(key) }, Status: c.enqueueCondition, Withheld: c.withheld, GateOff: c.logGateOffOnce,
		Fence: c.fenced,
	}
	if deps.Jobs != nil {
		c.jobs = deps.Jobs.Lister()
		c.jobIdx = deps.Jobs.Informer().GetIndexer()
		jobDeps.Jobs, jobDeps.Index = c.jobs, c.jobIdx
	}
	c.jobTemplates = jobtemplate.New(jobtemplate.Config{Threshold: cfg.Threshold, ServerMinor: cfg.ServerMinor, Ignored: c.ignored}, jobDeps)
	if deps.Jobs != nil {
		c.synced = append(c.synced, deps.Jobs.Informer().HasSynced)
		if err := addIndexers(deps.Jobs.Informer(), cache.Indexers{jobtemplate.CronJobIndex: jobtemplate.IndexByCronJob, uidIndex: indexByUID}); err != nil {
			return nil, fmt.Errorf("adding Job index: %w", err)
		}
		if err := c.handle(deps.Jobs.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.jobTemplates.OnJob(logger, nil, obj) },
			UpdateFunc: func(old, obj any) { c.jobTemplates.OnJob(logger, old, obj) },
			DeleteFunc: func(obj any) { c.jobTemplates.OnJobDelete(logger, obj) },
		}); err != nil {
			return nil, fmt.Errorf("adding Job handler: %w", err)
		}
	}
	if deps.Nodes != nil {
		c.nodes = deps.Nodes.Lister()
		c.synced = append(c.synced, deps.Nodes.Informer().HasSynced)
		if err := c.handle(deps.Nodes.Informer(), cache.ResourceEventHandlerFuncs{
			UpdateFunc: c.onNode,
		}); err != nil {
			return nil, fmt.Errorf("adding Node handler: %w", err)
		}
		if err := c.watchNodePods(logger, deps); err != nil {
			return nil, err
		}
		if c.shared != nil {
			// Another replica's reservation gone may leave room for the
			// pods waiting on its node.
			c.unsubscribe = c.shared.Subscribe(c.enqueueWaitingOnNode)
		}
	}
	if deps.PDBs != nil {
		c.pdbs = deps.PDBs.Lister()
		c.synced = append(c.synced, deps.PDBs.Informer().HasSynced)
		if err := c.handle(deps.PDBs.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onPDB(nil, obj) },
			UpdateFunc: c.onPDB,
			DeleteFunc: func(obj any) { c.onPDB(nil, obj) },
		}); err != nil {
			return nil, fmt.Errorf("adding PodDisruptionBudget handler: %w", err)
		}
	}
	if deps.ConfigMaps != nil {
		if err := c.handle(deps.ConfigMaps.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onConfigMap(nil, obj) },
			UpdateFunc: c.onConfigMap,
			DeleteFunc: func(obj any) { c.onConfigMap(obj, nil) },
		}); err != nil {
			return nil, fmt.Errorf("adding ConfigMap handler: %w", err)
		}
	}
	c.unbind = c.metrics.Bind(c.gaugeSnapshot)
	return c, nil
}
