// Package updater is the InPlace updater's controller: informers on pods and
// VPAs feed a rate-limited workqueue of pods; a worker reads the caches, lets
// pkg/resize decide, and acts: the one place that calls the API to resize.
//
// A recommendation travels: VPA informer event -> the VPA's pods are queued
// -> worker -> resize.Decide -> patch pods/resize -> the outcome is recorded
// (pkg/infeasible) and reported (events).
package updater

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/infeasible"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
)

// Event reasons, on the pod.
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
)

// ownerIndex indexes pods by the UID of their controller.
const ownerIndex = "vpa-inplace/controller-uid"

// Resolver finds VPAs for pods and pods for VPAs (pkg/target).
type Resolver interface {
	VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error)
	Selector(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (labels.Selector, error)
	Forget(uid types.UID)
}

// Calculator computes what a pod's containers should get (pkg/recommendation).
type Calculator interface {
	ForPod(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (recommendation.Desired, error)
}

var (
	_ Resolver   = (*target.Resolver)(nil)
	_ Calculator = (*recommendation.Calculator)(nil)
)

// Config holds the updater's settings.
type Config struct {
	// Threshold is --pod-update-threshold.
	Threshold float64
	// EvictionTolerance is --eviction-tolerance: the fraction of a
	// workload's pods whose containers may be restarted by resizes at once.
	EvictionTolerance float64
	// ResyncInterval is --updater-interval.
	ResyncInterval time.Duration
	// Workers is the number of concurrent workers.
	Workers int
	// IgnoredNamespaces are skipped.
	IgnoredNamespaces []string
	// ServerMinor is the API server's minor version, 0 when unknown.
	ServerMinor int
}

// Deps are the controller's collaborators.
type Deps struct {
	Client      kubernetes.Interface
	Pods        coreinformers.PodInformer
	VPAs        vpainformers.VerticalPodAutoscalerInformer
	Resolver    Resolver
	Calculator  Calculator
	Store       infeasible.Store
	Recorder    record.EventRecorder
	FeatureGate featuregate.FeatureGate
	Now         func() time.Time
	// Metrics may be nil.
	Metrics *Metrics
}

// Controller is the InPlace updater.
type Controller struct {
	cfg      Config
	client   kubernetes.Interface
	pods     corelisters.PodLister
	podIdx   cache.Indexer
	vpas     vpalisters.VerticalPodAutoscalerLister
	synced   []cache.InformerSynced
	resolver Resolver
	calc     Calculator
	store    infeasible.Store
	recorder record.EventRecorder
	gate     featuregate.FeatureGate
	now      func() time.Time
	metrics  *Metrics
	ignored  sets.Set[string]
	queue    workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// gateOffLogged holds the VPAs already reported as skipped because the
	// gate is off, so each is logged once.
	gateOffLogged sets.Set[types.UID]
	// disrupting holds pods whose containers a resize of ours restarts and
	// whose resize has not completed yet.
	disrupting sets.Set[types.UID]
}

// New builds a Controller and registers its event handlers.
func New(ctx context.Context, cfg Config, deps Deps) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	c := &Controller{
		cfg:      cfg,
		client:   deps.Client,
		pods:     deps.Pods.Lister(),
		podIdx:   deps.Pods.Informer().GetIndexer(),
		vpas:     deps.VPAs.Lister(),
		synced:   []cache.InformerSynced{deps.Pods.Informer().HasSynced, deps.VPAs.Informer().HasSynced},
		resolver: deps.Resolver,
		calc:     deps.Calculator,
		store:    deps.Store,
		recorder: deps.Recorder,
		gate:     deps.FeatureGate,
		now:      deps.Now,
		metrics:  deps.Metrics,
		ignored:  sets.New(cfg.IgnoredNamespaces...),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 5*time.Minute),
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-updater"},
		),
		gateOffLogged: sets.New[types.UID](),
		disrupting:    sets.New[types.UID](),
	}
	if err := deps.Pods.Informer().AddIndexers(cache.Indexers{ownerIndex: indexByController}); err != nil {
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
	return c, nil
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

// HasSynced reports whether the informer caches have synced.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// Run starts the workers once the caches have synced and blocks until ctx
// is cancelled; then it drains and returns.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("caches did not sync before shutdown")
	}
	logger.Info("Caches synced; starting workers", "workers", c.cfg.Workers, "resyncInterval", c.cfg.ResyncInterval)

	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	// The resync runs at once, then every interval: it catches what events
	// missed and cleans up records of pods that are gone.
	wg.Go(func() { wait.UntilWithContext(ctx, c.Resync, c.cfg.ResyncInterval) })
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	logger.Info("Updater stopped")
	return nil
}

// Resync queues the pods of every InPlace VPA and forgets records of pods
// that no longer exist.
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
		}
	}
	forgotten := c.CleanupRecords()
	if len(forgotten) > 0 {
		logger.V(2).Info("Forgot records of pods that no longer exist", "count", len(forgotten))
	}
}

// CleanupRecords forgets the records of pods that are no longer in the
// cache and returns their UIDs.
func (c *Controller) CleanupRecords() []types.UID {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	live := sets.New[types.UID]()
	for _, p := range pods {
		live.Insert(p.UID)
	}
	return c.store.Retain(live.Has)
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
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

// sync handles one pod: read the caches, decide, act. A returned error is
// retried with backoff; permanent outcomes are recorded instead.
func (c *Controller) sync(ctx context.Context, key string) error {
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
		return nil
	}
	if !c.gate.Enabled(features.InPlace) {
		c.logGateOffOnce(logger, vpa)
		return nil
	}
	c.noteSettled(pod)

	desired, err := c.calc.ForPod(pod, vpa)
	if err != nil {
		return fmt.Errorf("computing recommendation: %w", err)
	}
	record, _ := c.store.Get(pod.UID)
	in := resize.Input{
		Pod:               pod,
		Desired:           desired,
		Record:            record,
		Threshold:         c.cfg.Threshold,
		ServerMinor:       c.cfg.ServerMinor,
		DisruptionAllowed: true,
	}
	if hasRestartPolicy(pod) {
		in.DisruptionAllowed = c.disruptionAllowed(pod)
	}
	d := resize.Decide(in)
	c.metrics.decided(d)
	logger.V(2).Info("Decided", "vpa", klog.KObj(vpa), "action", d.Action, "reason", d.Reason, "message", d.Message)
	return c.act(ctx, pod, d)
}

// act carries out a decision.
func (c *Controller) act(ctx context.Context, pod *corev1.Pod, d resize.Decision) error {
	logger := klog.FromContext(ctx)
	if d.ClearRecord {
		c.store.Delete(pod.UID)
	}
	if d.NewRecord != nil {
		d.NewRecord.RecordedAt = c.now()
		c.store.Put(pod.UID, d.NewRecord)
		c.reportRecord(ctx, pod, d.NewRecord)
	}
	if d.Action != resize.ActionPatch {
		return nil
	}

	_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, d.Patch, metav1.PatchOptions{}, "resize")
	outcome := resize.ClassifyPatchError(err)
	c.metrics.patched(outcome)
	switch outcome {
	case resize.OutcomeAccepted:
		c.store.Delete(pod.UID)
		if d.Disruptive {
			c.mu.Lock()
			c.disrupting.Insert(pod.UID)
			c.mu.Unlock()
		}
		logger.Info("Resize sent", "target", d.Target.String(), "disruptive", d.Disruptive)
		c.recorder.Eventf(pod, corev1.EventTypeNormal, EventResizeSent, "Resizing in place to %s", d.Target.String())
		return nil
	case resize.OutcomeNodeCapacity:
		r := &infeasible.Record{Kind: infeasible.KindNodeCapacity, Attempted: d.Target, Message: statusMessage(err), RecordedAt: c.now()}
		c.store.Put(pod.UID, r)
		c.reportRecord(ctx, pod, r)
		return nil
	case resize.OutcomeInvalid:
		r := &infeasible.Record{Kind: infeasible.KindInvalid, Attempted: d.Target, Message: statusMessage(err), RecordedAt: c.now()}
		c.store.Put(pod.UID, r)
		c.reportRecord(ctx, pod, r)
		return nil
	case resize.OutcomeGone:
		return nil
	default:
		return fmt.Errorf("resize patch (%s): %w", outcome, err)
	}
}

func statusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// reportRecord logs and emits the event for a newly recorded outcome.
func (c *Controller) reportRecord(ctx context.Context, pod *corev1.Pod, r *infeasible.Record) {
	reason := EventResizeInfeasible
	what := "infeasible"
	if r.Kind == infeasible.KindInvalid {
		reason, what = EventResizeInvalid, "not possible in place"
	}
	klog.FromContext(ctx).Info("Resize recorded as "+what, "kind", r.Kind, "attempted", r.Attempted.String(), "message", r.Message)
	c.recorder.Eventf(pod, corev1.EventTypeWarning, reason,
		"Resize to %s is %s (%s: %s); not retried until the recommendation changes", r.Attempted.String(), what, r.Kind, r.Message)
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

// noteSettled forgets a pod's disruptive resize once it has completed.
func (c *Controller) noteSettled(pod *corev1.Pod) {
	if resize.ReadStatus(pod).State != resize.StateNone || !isReady(pod) {
		return
	}
	c.mu.Lock()
	c.disrupting.Delete(pod.UID)
	c.mu.Unlock()
}

// disruptionAllowed tells whether one more pod of pod's workload may have
// its containers restarted: at most max(1, floor(tolerance x pods)) pods of a
// workload are disrupted at once, counting pods that are not ready and pods
// whose restarting resize has not completed.
func (c *Controller) disruptionAllowed(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return true
	}
	siblings, err := c.podIdx.ByIndex(ownerIndex, string(ref.UID))
	if err != nil {
		return false
	}
	total, disrupted := 0, 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, obj := range siblings {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		total++
		if p.UID == pod.UID {
			continue
		}
		if !isReady(p) || c.disrupting.Has(p.UID) {
			disrupted++
		}
	}
	allowed := int(math.Floor(c.cfg.EvictionTolerance * float64(total)))
	allowed = max(allowed, 1)
	return disrupted < allowed
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
	c.mu.Lock()
	c.disrupting.Delete(pod.UID)
	c.mu.Unlock()
}

// onVPA queues the VPA's pods when its recommendation or spec changed.
func (c *Controller) onVPA(ctx context.Context, oldObj, obj any) {
	vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok || c.ignored.Has(vpa.Namespace) {
		return
	}
	if old, ok := oldObj.(*vpatypes.VerticalPodAutoscaler); ok {
		if apiequality.Semantic.DeepEqual(old.Spec, vpa.Spec) &&
			apiequality.Semantic.DeepEqual(old.Status.Recommendation, vpa.Status.Recommendation) {
			return
		}
		if !isInPlace(old) && !isInPlace(vpa) {
			return
		}
	} else if !isInPlace(vpa) {
		return
	}
	c.enqueueVPAPods(ctx, vpa)
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
	c.mu.Lock()
	c.gateOffLogged.Delete(vpa.UID)
	c.mu.Unlock()
}

func (c *Controller) enqueueVPAPods(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) {
	if c.ignored.Has(vpa.Namespace) {
		return
	}
	sel, err := c.resolver.Selector(ctx, vpa)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot find the VPA's pods", "vpa", klog.KObj(vpa), "err", err)
		return
	}
	pods, err := c.pods.Pods(vpa.Namespace).List(sel)
	if err != nil {
		return
	}
	for _, p := range pods {
		c.queue.Add(vpa.Namespace + "/" + p.Name)
	}
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

func hasRestartPolicy(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		for _, rp := range c.ResizePolicy {
			if rp.RestartPolicy == corev1.RestartContainer {
				return true
			}
		}
	}
	return false
}
