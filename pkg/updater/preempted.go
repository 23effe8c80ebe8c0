package updater

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/preemption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// Resize preemption (KEP-5836): the scheduler may preempt pods of lower
// priority on the node of a Deferred resize. The updater sends resizes and
// never evicts; when a pod it resized waits Deferred and the scheduler
// preempts a pod on its node that it may have preempted for, the updater
// says so (an event on the pod and its VPA, a counter, the VPA condition
// while the resize is still Deferred), and counts the victim as none of its
// own disruptions: a victim is a pod being deleted, down for the eviction
// tolerance of its workload (pkg/updater/disruption) like any other, and
// never a place of ours. A pod whose VPA sends only what fits its node
// (resize-when: fits-node) is never Deferred by a resize of ours, so the
// scheduler never preempts for it.

// observePreemption attributes a pod the scheduler has just marked as a
// preemption victim to the pods of InPlace VPAs on its node whose Deferred
// resize it may have been preempted for, and queues those pods. Called
// from the pod handlers, for pods of every namespace; it reads only the
// pod caches and the ledger.
func (c *Controller) observePreemption(logger klog.Logger, old, pod *corev1.Pod) {
	since, marked := resize.PreemptedByScheduler(pod)
	if !marked || pod.Spec.NodeName == "" {
		return
	}
	if old != nil {
		if _, was := resize.PreemptedByScheduler(old); was {
			return
		}
	}
	victim := preemption.Victim{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName,
		Priority: resize.PodPriority(pod), Marked: since}
	attributed := false
	for _, p := range c.podsBoundTo(pod.Spec.NodeName) {
		if c.ignored.Has(p.Namespace) || !resize.MayHavePreemptedFor(p, pod) {
			continue
		}
		tracked, ok := c.tracker.Get(p.UID)
		if !ok {
			continue // not a pod of an InPlace VPA
		}
		key, err := cache.MetaNamespaceKeyFunc(p)
		if err != nil {
			continue
		}
		if c.preempted.Add(p.UID, key, tracked.VPA, victim) {
			attributed = true
			logger.V(2).Info("The scheduler preempted a pod on the node of a Deferred resize", "pod", klog.KObj(p),
				"victim", klog.KObj(pod), "node", pod.Spec.NodeName, "victimPriority", victim.Priority, "priority", resize.PodPriority(p))
			c.queue.Add(key)
		}
	}
	if attributed {
		c.metrics.ResizePreemption()
	}
}

// preemptionGone notes that a pod is deleted: as a victim, the pods it was
// attributed to are queued (their condition says it is gone); as a pod of
// ours, what was attributed to it is forgotten.
func (c *Controller) preemptionGone(pod *corev1.Pod) {
	for _, ref := range c.preempted.Gone(pod.UID) {
		c.queue.Add(ref.Key)
		c.enqueueCondition(ref.VPA)
	}
	c.preempted.Forget(pod.UID)
}

// podsBoundTo returns the cached pods bound to node: the cluster-wide node
// cache when there is one, the pods' own otherwise.
func (c *Controller) podsBoundTo(node string) []*corev1.Pod {
	if c.nodePodIdx != nil {
		return c.podsOnNode(node)
	}
	objs, err := c.podIdx.ByIndex(nodeIndex, node)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// reportPreemptions sends, once per victim, the events on the pod and its
// VPA, and queues the VPA's condition when something was attributed.
func (c *Controller) reportPreemptions(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) {
	victims := c.preempted.TakeUnreported(pod.UID)
	if len(victims) == 0 {
		return
	}
	for _, v := range victims {
		klog.FromContext(ctx).Info("Resize preemption: the scheduler preempted a pod on this pod's node while its resize was Deferred; the updater evicted nothing",
			"vpa", klog.KObj(vpa), "victim", klog.KRef(v.Namespace, v.Name), "node", v.Node, "victimPriority", v.Priority)
		c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventResizePreemption,
			"The scheduler preempted pod %s/%s (priority %d) on node %s, which may make room for this pod's Deferred resize (priority %d; resize preemption, KEP-5836); the updater evicted nothing and does not count it as one of its disruptions",
			v.Namespace, v.Name, v.Priority, v.Node, resize.PodPriority(pod))
		c.recorder.Eventf(vpa, corev1.EventTypeNormal, report.EventResizePreemption,
			"Pod %s: the scheduler preempted pod %s/%s (priority %d) on node %s, which may make room for its Deferred resize (resize preemption, KEP-5836); the updater evicted nothing",
			pod.Name, v.Namespace, v.Name, v.Priority, v.Node)
	}
	c.enqueueCondition(vpaKey(vpa))
}

// preemptionsOf is what the VPA condition says of the preemptions for its
// pods (condition.Summary.Preemptions).
func (c *Controller) preemptionsOf(key string) []condition.Preemption {
	var out []condition.Preemption
	for _, p := range c.preempted.Of(key) {
		name := p.Key
		if _, n, err := cache.SplitMetaNamespaceKey(p.Key); err == nil {
			name = n
		}
		for _, v := range p.Victims {
			out = append(out, condition.Preemption{Pod: name, Victim: v.Namespace + "/" + v.Name, Priority: v.Priority,
				Node: v.Node, Marked: v.Marked, Gone: v.Gone})
		}
	}
	return out
}
