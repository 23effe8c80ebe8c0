package updater

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// Run and its loops: the workers, the resync, the first load of the records.

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
	defer c.shutDownQueues()
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
	// Nor before the restarts under way are counted: the budget lives in
	// memory, and the restarts an earlier leader sent are not over.
	c.adoptRestarts(ctx)
	c.recordsLoaded.Store(true)
	logger.Info("Caches synced and records loaded; starting workers", "workers", c.cfg.Workers,
		"resyncInterval", c.cfg.ResyncInterval, "dryRun", c.cfg.DryRun)
	// From here, VPA events resolve their pods; the first resync below
	// queues every pod anyway.
	c.started.Store(true)

	var wg sync.WaitGroup
	wg.Go(func() { c.store.Run(ctx) })
	wg.Go(func() { c.memStore.Run(ctx) })
	wg.Go(func() { c.safetyStore.Run(ctx) })
	wg.Go(func() { c.jvmStore.Run(ctx) })
	// The first resync queues every pod; later ones, every interval, catch
	// what events missed and clean up records of pods that are gone.
	c.Resync(ctx)
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.processNext(ctx, c.queue, queuePod, c.syncCounted) {
			}
		})
	}
	wg.Go(func() {
		for c.processNext(ctx, c.vpaQueue, queueVPA, c.syncVPA) {
		}
	})
	wg.Go(func() {
		// A condition counts the pods already decided: written before the
		// first pass over the pods, it would say "No pods." and be
		// rewritten moments later.
		c.waitFirstPass(ctx)
		for c.processNext(ctx, c.statusQueue, queueCondition, c.conditions.Sync) {
		}
	})
	wg.Go(func() {
		for c.processNext(ctx, c.jobQueue, queueJob, c.syncJob) {
		}
	})
	wg.Go(func() {
		t := c.clock.NewTicker(c.cfg.ResyncInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				c.Resync(ctx)
			}
		}
	})
	<-ctx.Done()
	c.shutDownQueues()
	wg.Wait()
	logger.Info("Updater stopped")
	return nil
}

// RecordsLoaded is nil unless Run is loading the records (as a new leader)
// and they are not loaded yet: then it tells why, for /readyz. A standby,
// which loads nothing, is not held back by it.
func (c *Controller) RecordsLoaded() error {
	if !c.loading.Load() {
		return nil
	}
	for _, s := range []records.Store{c.store, c.memStore, c.safetyStore, c.jvmStore} {
		if err := s.Loaded(); err != nil {
			return fmt.Errorf("records not loaded: %w", err)
		}
	}
	return nil
}

// loadRecords loads the stores, retrying with backoff until they succeed or
// ctx is cancelled.
func (c *Controller) loadRecords(ctx context.Context) error {
	c.loading.Store(true)
	defer c.loading.Store(false)
	logger := klog.FromContext(ctx)
	// The delays run on the controller's clock, as every other delay does.
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: time.Minute}
	for _, store := range []records.Store{c.store, c.memStore, c.safetyStore, c.jvmStore} {
		for {
			err := store.Load(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			logger.Error(err, "Loading records; no resize is sent until they are loaded")
			select {
			case <-ctx.Done():
				return nil
			case <-c.clock.After(backoff.Step()):
			}
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
			if err := c.enqueueVPAPods(ctx, vpa); err != nil {
				// Retried by the VPA queue, with backoff.
				logger.V(2).Info("Cannot queue the VPA's pods; retrying", "err", err)
				c.vpaQueue.AddRateLimited(vpaKey(vpa))
			}
			c.jobTemplates.EnqueueVPAJobs(vpa)
		}
		if isInPlace(vpa) || condition.Has(vpa) {
			c.enqueueStatus(vpa)
		}
	}
	forgotten := c.CleanupRecords()
	if len(forgotten) > 0 {
		logger.V(2).Info("Forgot records of pods and Jobs that no longer exist", "count", len(forgotten))
	}
}

// CleanupRecords forgets the records (and memory records), the states and
// the restart reservations of pods and Jobs that are no longer in the cache,
// and returns the UIDs whose records it forgot.
func (c *Controller) CleanupRecords() []types.UID {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	jobs, err := c.jobTemplates.Live()
	if err != nil {
		return nil // no answer: nothing is forgotten
	}
	live := sets.New[types.UID](jobs...)
	for _, p := range pods {
		live.Insert(p.UID)
	}
	// What is reported and reserved goes with its object too, whatever
	// path missed it.
	for _, key := range append(c.tracker.Retain(live.Has, c.now()), c.jobTracker.Retain(live.Has, c.now())...) {
		c.enqueueCondition(key)
	}
	for range c.budget.Retain(live.Has) {
		c.metrics.RestartReservationEnded(string(disruption.EndGone))
	}
	if c.room != nil {
		c.room.Retain(live.Has)
	}
	c.memStore.Retain(live.Has)
	c.jvmStore.Retain(live.Has)
	c.watcher.Retain(live.Has)
	c.enqueuePods(c.canaries.Retain(live.Has))
	// A hold is keyed by its VPA's UID.
	if vpas, err := c.vpas.List(labels.Everything()); err == nil {
		liveVPAs := sets.New[types.UID]()
		for _, v := range vpas {
			liveVPAs.Insert(v.UID)
		}
		c.safetyStore.Retain(func(uid types.UID) bool { return live.Has(uid) || liveVPAs.Has(uid) })
		c.canaries.RetainVPAs(liveVPAs.Has)
	}
	return c.store.Retain(live.Has)
}

// waitFirstPass returns once the pod queue is empty and no worker is busy
// (the pods queued by the first resync are decided), or ctx is done. It
// waits for the workers, not for a time: its poll runs on real time, so that
// a controller on a fake clock still writes its conditions.
func (c *Controller) waitFirstPass(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.queue.Len() == 0 && c.busy.Load() == 0, nil
	})
}

func (c *Controller) shutDownQueues() {
	c.queue.ShutDown()
	c.vpaQueue.ShutDown()
	c.statusQueue.ShutDown()
	c.jobQueue.ShutDown()
}

// processNext takes one key off q and syncs it: a returned error, or a
// panic, retries the key with q's backoff. A panic in one item is recovered,
// counted and logged with its stack; the worker goes on with the others.
func (c *Controller) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], what string, sync func(context.Context, string) error) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	err := c.safeSync(ctx, what, key, sync)
	if err == nil {
		q.Forget(key)
		return true
	}
	klog.FromContext(ctx).V(2).Info("Will retry", "queue", what, "key", key, "err", err, "retries", q.NumRequeues(key))
	q.AddRateLimited(key)
	return true
}

func (c *Controller) safeSync(ctx context.Context, what, key string, sync func(context.Context, string) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.metrics.Panicked(what)
			klog.FromContext(ctx).Error(nil, "Recovered from a panic; the item is retried with backoff", "queue", what, "key", key,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
			if vpa := c.vpaOfItem(ctx, what, key); vpa != nil {
				c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventWorkerPanic,
					"The updater recovered from a panic while handling %s %s; it is retried with backoff: %s",
					what, key, condition.Truncate(fmt.Sprint(r), maxPanicMessage))
			}
		}
	}()
	return sync(ctx, key)
}

// maxPanicMessage bounds what a panic's value adds to its event.
const maxPanicMessage = 256

// vpaOfItem returns the VPA an item of queue what belongs to, nil when none
// is known: a pod's or a Job's from its tracked state or, untracked, from
// the resolver (which may be what panicked: a second panic is swallowed).
func (c *Controller) vpaOfItem(ctx context.Context, what, key string) (vpa *vpatypes.VerticalPodAutoscaler) {
	defer func() {
		if recover() != nil {
			vpa = nil
		}
	}()
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || key == killSwitchKey {
		return nil
	}
	vpaNamed := func(vpaKey string) *vpatypes.VerticalPodAutoscaler {
		ns, n, err := cache.SplitMetaNamespaceKey(vpaKey)
		if err != nil {
			return nil
		}
		v, err := c.vpas.VerticalPodAutoscalers(ns).Get(n)
		if err != nil {
			return nil
		}
		return v
	}
	switch what {
	case queueVPA, queueCondition:
		return vpaNamed(key)
	case queuePod:
		pod, err := c.pods.Pods(namespace).Get(name)
		if err != nil {
			return nil
		}
		if s, ok := c.tracker.Get(pod.UID); ok {
			return vpaNamed(s.VPA)
		}
		vpa, _ = c.resolver.VPAForPod(ctx, pod)
		return vpa
	case queueJob:
		if c.jobs == nil {
			return nil
		}
		job, err := c.jobs.Jobs(namespace).Get(name)
		if err != nil {
			return nil
		}
		if s, ok := c.jobTracker.Get(job.UID); ok {
			return vpaNamed(s.VPA)
		}
		vpa, _ = c.resolver.VPAForJob(ctx, job)
		return vpa
	}
	return nil
}

// The queues' names, in logs and in the worker panics' metric label.
const (
	queuePod       = "pod"
	queueVPA       = "vpa"
	queueCondition = "condition"
	queueJob       = "job"
)

// syncJob is the Job queue's sync: no Job is decided before the records
// are loaded either.
func (c *Controller) syncJob(ctx context.Context, key string) error {
	if !c.recordsLoaded.Load() {
		return errRecordsNotLoaded
	}
	return c.jobTemplates.Sync(ctx, key)
}

// syncCounted is sync, counted as busy for waitFirstPass.
func (c *Controller) syncCounted(ctx context.Context, key string) error {
	c.busy.Add(1)
	defer c.busy.Add(-1)
	return c.sync(ctx, key)
}

// killSwitchKey, on the VPA queue, stands for "the cluster-wide kill switch
// changed": no VPA key is empty.
const killSwitchKey = ""

// syncVPA queues the pods and Jobs of one InPlace VPA; for killSwitchKey,
// those of every VPA (Resync).
func (c *Controller) syncVPA(ctx context.Context, key string) error {
	if key == killSwitchKey {
		paused, why := c.clusterPaused()
		klog.FromContext(ctx).Info("Cluster-wide kill switch changed", "configMap", c.cfg.ConfigMap, "paused", paused, "why", why)
		c.Resync(ctx)
		return nil
	}
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	vpa, err := c.vpas.VerticalPodAutoscalers(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.dropGoneHarms(ctx, key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading VPA from cache: %w", err)
	}
	if !isInPlace(vpa) {
		c.dropGoneHarms(ctx, key)
		return nil
	}
	c.settleGoneHarms(ctx, vpa)
	c.jobTemplates.EnqueueVPAJobs(vpa)
	return c.enqueueVPAPods(ctx, vpa)
}
