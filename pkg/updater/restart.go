package updater

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Resizes that restart containers (resizePolicy RestartContainer on a
// changed resource) are voluntary disruptions: pkg/updater/disruption holds
// the rule. Here the controller feeds it: it reserves a pod just before its
// resize is sent, gives the reservation back when the resize is refused or
// fails, and shows it every update of a reserved pod, so that the
// reservation ends when the pod is back. When one ends, the other pods of
// the workload are looked at again at once (one may be waiting), and so are
// the waiting pods of a namespace when one of its PodDisruptionBudgets
// changes.

// reserveRestart asks the budget whether pod may be restarted now and, if
// so, reserves it.
func (c *Controller) reserveRestart(pod *corev1.Pod) disruption.Verdict {
	req := disruption.Request{Pod: pod, MinReady: c.minReady.For(pod)}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		req.Workload = string(ref.UID)
		objs, err := c.podIdx.ByIndex(ownerIndex, string(ref.UID))
		if err != nil {
			return disruption.Verdict{Blocker: "the eviction tolerance", Message: "the pods of the workload cannot be listed: " + err.Error()}
		}
		req.Siblings = make([]*corev1.Pod, 0, len(objs))
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				req.Siblings = append(req.Siblings, p)
			}
		}
	}
	if c.pdbs != nil {
		pdbs, err := c.pdbs.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
		if err != nil {
			return disruption.Verdict{Blocker: "PodDisruptionBudgets", Message: "the PodDisruptionBudgets cannot be listed: " + err.Error()}
		}
		req.PDBs = pdbs
	}
	return c.budget.Reserve(req)
}

// observeRestart shows a pod to the budget. When its reservation ends, the
// other pods of its workload are queued; while it must stay Ready a while
// longer, the pod is queued again when that time is up.
func (c *Controller) observeRestart(ctx context.Context, pod *corev1.Pod) {
	ended, after := c.budget.Observe(pod)
	switch {
	case ended:
		klog.FromContext(ctx).V(2).Info("Restarted pod is back; the next pod of its workload may go")
		c.enqueueSiblings(pod)
	case after > 0:
		c.queue.AddAfter(pod.Namespace+"/"+pod.Name, after)
	}
}

// enqueueSiblings queues the other pods of pod's workload.
func (c *Controller) enqueueSiblings(pod *corev1.Pod) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return
	}
	objs, err := c.podIdx.ByIndex(ownerIndex, string(ref.UID))
	if err != nil {
		return
	}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.UID != pod.UID {
			c.enqueuePod(p.Namespace + "/" + p.Name)
		}
	}
}

// onPDB queues the pods waiting for a budget in the PDB's namespace when
// the PDB's status or selector changes.
func (c *Controller) onPDB(oldObj, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok || c.ignored.Has(pdb.Namespace) {
		return
	}
	if old, ok := oldObj.(*policyv1.PodDisruptionBudget); ok && old.ResourceVersion == pdb.ResourceVersion {
		return
	}
	for _, key := range waiting(c.tracker, func(s state.Pod) bool {
		return s.State == state.PodWaiting && strings.HasPrefix(s.VPA, pdb.Namespace+"/")
	}) {
		c.enqueuePod(key)
	}
}

// waitForBudget reports, once per blocker, that a pod's restarting resize
// waits.
func (c *Controller) waitForBudget(pod *corev1.Pod, v disruption.Verdict) {
	if c.tracker.Once(pod.UID, noteWaiting, v.Blocker) {
		c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventResizeWaitingForBudget,
			"Resize restarts containers; waiting for %s: %s", v.Blocker, v.Message)
	}
}

// waiting returns the keys of the tracked pods match picks (a pod's
// namespace is its VPA's).
func waiting(t *state.Tracker[state.PodState], match func(state.Pod) bool) []string {
	picked := t.Select(match)
	out := make([]string, 0, len(picked))
	for _, s := range picked {
		namespace, _, _ := strings.Cut(s.VPA, "/")
		out = append(out, namespace+"/"+s.Name)
	}
	return out
}

// restartMinReadyDefault is --restart-min-ready's default.
const restartMinReadyDefault = 30 * time.Second
