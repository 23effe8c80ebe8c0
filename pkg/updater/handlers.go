package updater

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	uwindow "github.com/vpa-inplace/vpa-inplace/pkg/updater/window"
)

// Event handlers. They only look at the objects they are given and queue
// keys: reading other objects and calling the API is left to the workers.

const (
	// ownerIndex indexes pods by the UID of their controller.
	ownerIndex = "vpa-inplace/controller-uid"
	// customOwnerIndex indexes pods whose controller may be a custom
	// resource by that controller (target.Owner.Key): the pods of a VPA
	// whose target is a custom resource without /scale.
	customOwnerIndex = "vpa-inplace/custom-controller"
)

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

// onPod queues a pod when something the decision depends on changed.
func (c *Controller) onPod(logger klog.Logger, oldObj, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	old, isUpdate := oldObj.(*corev1.Pod)
	if isUpdate && c.roomSeenByPods {
		// The cache the ledger reads: the resize it holds room for is in
		// it now, or not yet.
		c.room.Seen(pod)
		if c.shared != nil {
			c.shared.Seen(pod)
		}
	}
	if isUpdate && freesRoom(old, pod) {
		// Whatever its namespace: its node's room is every pod's.
		c.enqueueWaitingOnNode(pod.Spec.NodeName)
	}
	// Whatever its namespace too: a victim of the scheduler's preemption.
	c.observePreemption(logger, old, pod)
	if c.ignored.Has(pod.Namespace) || (isUpdate && !relevantPodChange(old, pod) && !c.watchedPodChange(old, pod)) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		logger.Error(err, "Cannot key pod")
		return
	}
	c.queue.Add(key)
}

// relevantPodChange reports whether an update may change a decision: the
// spec's resources, the resize status, readiness, phase, generation, the
// containers with a startup boost or a container's restart.
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
	if !apiequality.Semantic.DeepEqual(resizeConditions(old), resizeConditions(pod)) ||
		!slices.Equal(boost.Containers(old), boost.Containers(pod)) || containerRestarted(old, pod) {
		return true
	}
	if !sameResources(old.Spec.Containers, pod.Spec.Containers) || !sameResources(old.Spec.InitContainers, pod.Spec.InitContainers) {
		return true
	}
	return !apiequality.Semantic.DeepEqual(containerResources(old), containerResources(pod))
}

// sameResources tells whether each container of now has the resources it
// had before (sidecars are init containers).
func sameResources(before, now []corev1.Container) bool {
	for i := range now {
		if i >= len(before) || !apiequality.Semantic.DeepEqual(before[i].Resources, now[i].Resources) {
			return false
		}
	}
	return true
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
	out := make([]any, 0, 2*(len(p.Status.ContainerStatuses)+len(p.Status.InitContainerStatuses)))
	for _, statuses := range [2][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, s := range statuses {
			out = append(out, s.AllocatedResources, s.Resources)
		}
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
	c.jvmStore.Delete(pod.UID)
	if key, ok := c.tracker.Deleted(pod.UID, c.now()); ok {
		c.enqueueCondition(key)
	}
	if c.budget.Forget(pod.UID) {
		c.restartEnded(pod, disruption.EndGone)
	}
	c.preemptionGone(pod)
	if c.room != nil {
		c.room.Release(pod)
	}
	if c.shared != nil {
		c.shared.Release(pod)
	}
	c.podGone(pod)
	c.enqueueWaitingOnNode(pod.Spec.NodeName)
}

// onVPA queues the VPA's condition, and its pods when its recommendation,
// spec or pause annotation changed.
func (c *Controller) onVPA(oldObj, obj any) {
	vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok || c.ignored.Has(vpa.Namespace) {
		return
	}
	old, isUpdate := oldObj.(*vpatypes.VerticalPodAutoscaler)
	switch {
	case isInPlace(vpa) || condition.Has(vpa):
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
		old.Annotations[PausedAnnotation] == vpa.Annotations[PausedAnnotation] &&
		!uwindow.Changed(old.Annotations, vpa.Annotations) {
		return
	}
	if newRecommendation {
		c.mu.Lock()
		c.recommendationSeen[vpa.UID] = c.now()
		c.mu.Unlock()
	}
	// A worker finds its pods and Jobs (syncVPA): that may read the
	// target's /scale.
	c.vpaQueue.Add(vpaKey(vpa))
	if isUpdate && old.Spec.TargetRef != nil && !apiequality.Semantic.DeepEqual(old.Spec.TargetRef, vpa.Spec.TargetRef) {
		// The Jobs it no longer targets are looked at again.
		c.jobTemplates.EnqueueVPAJobs(old)
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
	c.windows.Forget(vpa.UID)
	// The VPA's records went with its annotations.
	c.store.ForgetOwner(ownerOf(vpa))
	c.memStore.ForgetOwner(ownerOf(vpa))
	c.safetyStore.ForgetOwner(ownerOf(vpa))
	c.jvmStore.ForgetOwner(ownerOf(vpa))
	c.canaries.Forget(vpa.UID)
	c.tracker.ForgetVPA(vpaKey(vpa))
	c.jobTracker.ForgetVPA(vpaKey(vpa))
	c.jobTemplates.EnqueueVPAJobs(vpa)
	c.mu.Lock()
	c.gateOffLogged.Delete(vpa.UID)
	delete(c.recommendationSeen, vpa.UID)
	delete(c.safetyWarned, vpa.UID)
	delete(c.jvmWarned, string(vpa.UID))
	delete(c.goneHarms, vpaKey(vpa))
	c.mu.Unlock()
	c.initIgnored.forget(vpa.UID)
}

// onConfigMap reacts to the cluster-wide kill switch: when it flips, every
// InPlace VPA's pods and condition are looked at again.
func (c *Controller) onConfigMap(oldObj, obj any) {
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
	c.vpaQueue.Add(killSwitchKey)
}

func (c *Controller) enqueueVPAPods(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) error {
	// Before Run starts the workers, the informers of the targets may not
	// have synced: resolving now would find no target. Run's first resync
	// queues every pod.
	if c.ignored.Has(vpa.Namespace) || !c.started.Load() {
		return nil
	}
	pods, err := c.podsOfVPA(ctx, vpa)
	if err != nil {
		return err
	}
	for _, p := range pods {
		c.enqueuePod(p.Namespace + "/" + p.Name)
	}
	return nil
}

// podsOfVPA returns the VPA's pods in the cache: by its target's selector,
// or by the custom resource that controls them.
func (c *Controller) podsOfVPA(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) ([]*corev1.Pod, error) {
	logger := klog.FromContext(ctx)
	t, err := c.resolver.Target(ctx, vpa)
	if err != nil {
		return nil, fmt.Errorf("finding the pods of VPA %s: %w", klog.KObj(vpa), err)
	}
	var pods []*corev1.Pod
	switch {
	case t.Owner != nil:
		var objs []any
		objs, err = c.podIdx.ByIndex(customOwnerIndex, t.Owner.Key())
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				pods = append(pods, p)
			}
		}
	case t.Selector == nil:
		logger.V(2).Info("Cannot find the VPA's pods: its target has neither selector nor owner", "vpa", klog.KObj(vpa))
		return nil, nil
	default:
		pods, err = selectPods(c.podIdx, vpa.Namespace, t.Selector)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the pods of VPA %s (target %s) from the cache: %w", klog.KObj(vpa), t.String(), err)
	}
	return pods, nil
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
	c.enqueueCondition(vpaKey(vpa))
}
