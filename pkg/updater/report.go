package updater

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Reporting a pod's outcome: its state for the VPA condition and the
// gauges, and the events on the pod and its VPA.

// report remembers a pod's state, queues its VPA's condition when it
// changed, and warns once about a resize Deferred for too long.
func (c *Controller) report(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, st state.Pod, rs resize.Status) {
	st.VPA, st.Name = vpaKey(vpa), pod.Name
	now := c.now()
	for _, key := range c.tracker.Set(pod.UID, st, now) {
		c.enqueueCondition(key)
	}
	switch st.State {
	case state.PodWithheld:
		if c.tracker.Once(pod.UID, noteWithheld, st.Values) {
			c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventResizeWithheld, "Would resize in place to %s; not sent: %s", st.Values, st.Message)
		}
	case state.PodDeferred:
		c.warnDeferred(ctx, pod, vpa, rs)
	}
	c.reportPreemptions(ctx, pod, vpa)
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
	tracked, ok := c.tracker.Get(pod.UID)
	if !ok {
		return
	}
	since := tracked.Since
	age := c.now().Sub(since)
	if age < after {
		c.queue.AddAfter(pod.Namespace+"/"+pod.Name, after-age)
		return
	}
	if !c.tracker.Once(pod.UID, noteDeferred, since.UTC().Format(time.RFC3339Nano)) {
		return
	}
	waited := age.Round(time.Second)
	klog.FromContext(ctx).Info("Resize deferred for too long; still waiting, the pod is not evicted", "vpa", klog.KObj(vpa), "since", since, "waited", waited)
	c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventResizeDeferredTooLong,
		"Resize deferred by the kubelet for %s (since %s): %s; still waiting, the pod is not evicted",
		waited, since.UTC().Format(time.RFC3339), rs.Message)
	c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventResizeDeferredTooLong,
		"Pod %s: resize deferred by the kubelet for %s (since %s): %s; still waiting, the pod is not evicted",
		pod.Name, waited, since.UTC().Format(time.RFC3339), rs.Message)
}

// untrack forgets a pod's state and queues its VPA's condition.
func (c *Controller) untrack(uid types.UID) {
	if key, ok := c.tracker.Forget(uid); ok {
		c.enqueueCondition(key)
	}
}

// reportRecord logs and emits the events, on the pod and on its VPA, for a
// newly recorded outcome.
func (c *Controller) reportRecord(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, r *records.Record) {
	reason := report.EventResizeInfeasible
	what := "infeasible"
	if r.Kind == records.KindInvalid {
		reason, what = report.EventResizeInvalid, "not possible in place"
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
	c.metrics.MemoryLimitsHeld(r.Kind)
	klog.FromContext(ctx).Info("Memory limits not lowered", "vpa", klog.KObj(vpa), "kind", r.Kind, "notBelow", r.Attempted.String(),
		"message", r.Message, "kept", resize.DescribeHeld(d.Held))
	rest := "nothing else to resize"
	if d.Action == resize.ActionPatch {
		rest = "the rest of the resize is sent"
	}
	var reason, what string
	switch r.Kind {
	case records.KindMemoryLimitRefused:
		reason = report.EventMemoryLimitRefused
		what = fmt.Sprintf("the kubelet refused to lower memory limits to %s (%s); these limits and lower ones are not sent again, and the resize is sent once more with the running memory limits kept",
			r.Attempted.String(), r.Message)
	default:
		reason = report.EventMemoryLimitKept
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

// conditionSummary is what a VPA's condition is made from (condition.Source).
func (c *Controller) conditionSummary(vpa *vpatypes.VerticalPodAutoscaler) (condition.Summary, bool) {
	if !isInPlace(vpa) {
		return condition.Summary{}, false
	}
	key := vpaKey(vpa)
	notDurable := ""
	for _, s := range []records.Store{c.store, c.memStore, c.safetyStore, c.jvmStore} {
		if err := s.WriteError(ownerOf(vpa)); err != nil {
			notDurable = err.Error()
			break
		}
	}
	reverted, canaryStatus, invalid := c.safetySummary(vpa)
	if problem := jvmAnnotationProblem(vpa); problem != "" && invalid != "" {
		invalid += ". " + problem
	} else if problem != "" {
		invalid = problem
	}
	killSwitch, _ := c.clusterPaused()
	return condition.Summary{
		Pods:          c.tracker.Of(key),
		Jobs:          c.jobTracker.Of(key),
		Paused:        c.pausedWhy(vpa),
		KillSwitch:    killSwitch,
		GateOff:       !c.gate.Enabled(features.InPlace),
		DryRun:        c.cfg.DryRun,
		NotDurable:    notDurable,
		Reverted:      reverted,
		Canary:        canaryStatus,
		SafetyInvalid: invalid,
		Preemptions:   c.preemptionsOf(key),
	}, true
}

// enqueueCondition queues a VPA's condition, to be looked at once its pods
// have settled (condition.Delay).
func (c *Controller) enqueueCondition(key string) {
	c.statusQueue.AddAfter(key, condition.Delay)
}

// gaugeSnapshot is read by the metrics at each scrape.
func (c *Controller) gaugeSnapshot() report.GaugeSnapshot {
	pending, oldest := c.tracker.Counts(c.now())
	jobs, _ := c.jobTracker.Counts(c.now())
	paused, _ := c.clusterPaused()
	metricsAPI := c.usage != nil && c.usage.Available()
	return report.GaugeSnapshot{Records: c.store.Len(), MemoryRecords: c.memStore.Len(), Pending: pending, Oldest: oldest,
		Paused: paused, DryRun: c.cfg.DryRun, MetricsAPI: metricsAPI, Jobs: jobs, Boosted: pending[state.PodBoosted],
		RestartReservations: c.budget.Counts(), NodeRoomHolds: c.roomHolds(),
		Watched: c.watcher.Len(), HarmHolds: c.canaries.Holds(), CanaryWaiting: pending[state.PodCanaryWait]}
}
