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
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Resizes that restart containers (resizePolicy RestartContainer on a
// changed resource) are voluntary disruptions: pkg/updater/disruption holds
// the rule. Here the controller feeds it: it reserves a pod just before its
// resize is sent; gives the reservation back when the resize is refused,
// fails before it could be applied, or is recorded as impossible; keeps it
// when the answer was lost (the patch may have been applied); and shows it
// every update of a reserved pod, so that the reservation ends when the pod
// is back, when the kubelet marks the resize Infeasible, or when it has not
// been applied for --restart-reservation-timeout and the pod shows no
// pending resize that would restart it. When one ends, the pods
// that may wait for it are looked at again at once: the other pods of the
// workload, and those of the namespace waiting for a PodDisruptionBudget;
// the waiting pods of a namespace are also looked at again when one of its
// PodDisruptionBudgets changes. Before its first resize, a new leader
// reserves the restarts it finds under way (adoptRestarts).

// restartRequest is what a restarting resize of pod is checked against;
// a verdict instead when the caches cannot be read.
func (c *Controller) restartRequest(pod *corev1.Pod) (disruption.Request, *disruption.Verdict) {
	req := disruption.Request{Pod: pod, MinReady: c.minReady.For(pod)}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		req.Workload = string(ref.UID)
		objs, err := c.podIdx.ByIndex(ownerIndex, string(ref.UID))
		if err != nil {
			return req, &disruption.Verdict{Blocker: "the eviction tolerance", Message: "the pods of the workload cannot be listed: " + err.Error()}
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
			return req, &disruption.Verdict{Blocker: "PodDisruptionBudgets", Message: "the PodDisruptionBudgets cannot be listed: " + err.Error()}
		}
		req.PDBs = pdbs
	}
	return req, nil
}

// reserveRestart asks the budget whether pod may be restarted now and, if
// so, reserves it.
func (c *Controller) reserveRestart(pod *corev1.Pod) disruption.Verdict {
	req, refused := c.restartRequest(pod)
	if refused != nil {
		return *refused
	}
	return c.budget.Reserve(req)
}

// budgetGate takes a resize's place under the disruption budget when it
// restarts containers, a revert's and a boost's too. The place is kept
// while a restart may come: the resize accepted, or its answer lost; it is
// given back when nothing was sent or the API server refused it.
type budgetGate struct{ c *Controller }

func (budgetGate) Name() string { return "disruption budget" }

func (budgetGate) Scope() gate.Scope { return gate.Restarts | gate.Boosts | gate.Reverts }

func (g budgetGate) Admit(_ context.Context, a *attempt) gate.Verdict {
	v := g.c.reserveRestart(a.pod)
	if v.Allowed {
		return passed
	}
	why := v.Blocker + ": " + v.Message
	a.in.DisruptionAllowed, a.in.DisruptionRefused = false, why
	a.decide()
	a.budget = &v
	return gate.Verdict{Answer: gate.Wait, Reason: "DisruptionBudget", Why: why}
}

func (g budgetGate) Release(_ context.Context, a *attempt, o gate.Outcome) {
	switch o {
	case gate.Sent:
		g.c.budget.Sent(a.pod.UID)
	case gate.Lost:
		// The answer was lost, not the patch: the pod may restart. The
		// place is kept until the pod shows what happened, or a patch
		// sent again is answered.
		g.c.budget.Unconfirmed(a.pod.UID)
	case gate.Refused:
		g.c.releaseRestart(a.pod, disruption.EndRefused)
	default:
		g.c.releaseRestart(a.pod, disruption.EndWithheld)
	}
}

// releaseRestart gives pod's reservation back: nothing restarts.
func (c *Controller) releaseRestart(pod *corev1.Pod, why disruption.EndReason) {
	if c.budget.Release(pod.UID, why) {
		c.restartEnded(pod, why)
	}
}

// restartEnded counts a reservation that ended and queues the pods that
// may wait for it.
func (c *Controller) restartEnded(pod *corev1.Pod, why disruption.EndReason) {
	c.metrics.RestartReservationEnded(string(why))
	c.enqueueSiblings(pod)
	c.enqueueWaitingForPDB(pod.Namespace)
}

// observeRestart shows a pod to the budget. When its reservation ends, the
// pods that may wait for it are queued; while it is held, the pod is queued
// again when its minReady is up or its reservation expires.
func (c *Controller) observeRestart(ctx context.Context, pod *corev1.Pod) {
	o := c.budget.Observe(pod)
	logger := klog.FromContext(ctx)
	switch o.Ended {
	case "":
		if o.After > 0 {
			c.queue.AddAfter(pod.Namespace+"/"+pod.Name, o.After)
		}
		if o.Overdue {
			logger.Info("Restarting resize still not applied; its place is kept while the pod shows it pending: the kubelet may apply it at any time",
				"timeout", c.cfg.RestartReservationTimeout, "state", o.Message)
		}
		return
	case disruption.EndBack:
		logger.V(2).Info("Restarted pod is back; the next pod of its workload may go")
	case disruption.EndInfeasible:
		logger.V(2).Info("Restarting resize marked Infeasible by the kubelet: nothing restarts; its place is given back")
	case disruption.EndExpired:
		logger.Info("Restarting resize still not applied; its place is given back", "timeout", c.cfg.RestartReservationTimeout, "state", o.Message)
		c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventRestartReservationExpired,
			"The resize restarts containers and is still not applied after %s (%s), and the pod shows no resize pending that would restart it; its place under the eviction tolerance and PodDisruptionBudgets is given back, so that the other pods of the workload may be resized.",
			c.cfg.RestartReservationTimeout, o.Message)
	}
	c.restartEnded(pod, o.Ended)
}

// adoptRestarts reserves the restarts by resizes found under way in the
// cache (disruption.RestartUnderWay): sent by an earlier leader, or before
// the updater restarted, and not over yet. Run calls it once the caches
// have synced, before any resize is sent: the budget lives in memory only.
// Every pod is queued by its first add event, and sync observes a pod's
// place before it resolves its VPA: a place adopted for a pod of no InPlace
// VPA ends as any other.
func (c *Controller) adoptRestarts(ctx context.Context) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return
	}
	now := c.now()
	adopted := 0
	for _, pod := range pods {
		if c.ignored.Has(pod.Namespace) {
			continue
		}
		since, ok := disruption.RestartUnderWay(pod, c.minReady.For(pod), now)
		if !ok {
			continue
		}
		req, refused := c.restartRequest(pod)
		if refused != nil {
			continue
		}
		c.budget.Adopt(req, since)
		adopted++
		klog.FromContext(ctx).V(2).Info("Restart under way counted against its budget", "pod", klog.KObj(pod), "since", since)
	}
	if adopted > 0 {
		klog.FromContext(ctx).Info("Restarts by resizes found under way; counted before any resize is sent", "pods", adopted)
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

// enqueueWaitingForPDB queues the pods of namespace waiting for a
// PodDisruptionBudget.
func (c *Controller) enqueueWaitingForPDB(namespace string) {
	for _, key := range waiting(c.tracker, func(s state.Pod) bool {
		return s.State == state.PodWaiting && strings.HasPrefix(s.Values, "PodDisruptionBudget ") && strings.HasPrefix(s.VPA, namespace+"/")
	}) {
		c.enqueuePod(key)
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

// restartReservationTimeoutDefault is --restart-reservation-timeout's
// default.
const restartReservationTimeoutDefault = 10 * time.Minute
