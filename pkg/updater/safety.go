package updater

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/canary"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/observe"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// Safety after the resize (docs/safety-after-resize.md). Every resize sent
// is watched from its completion for the VPA's window (pkg/updater/observe):
// the pod path shows the watcher each update of the pod, and asks to see it
// again when its window ends. Harm after a resize that lowered values
// reverts the pod in place, through the ordinary decision (node room and
// disruption budget applying), and holds the values for the whole VPA
// (pkg/updater/canary); harm after a resize that raised them is reported.
// A decrease goes to the VPA's canaries first: before a resize that lowers
// anything is sent, the gate says which of its decreases may go, and takes a
// canary's place in the same step. The gate's state that must survive a
// restart is kept in the safety records (records.StoreSafety).

// Defaults of the safety flags.
const (
	observationWindowDefault = 10 * time.Minute
	harmHoldDefault          = 24 * time.Hour
	notReadyGraceDefault     = time.Minute
)

// safetyOf returns a VPA's canary setting and window: its annotations, or
// the updater's defaults; problem says which annotation cannot be read.
func (c *Controller) safetyOf(vpa *vpatypes.VerticalPodAutoscaler) (resize.Canary, time.Duration, string) {
	canarySetting, window := c.cfg.Canary, c.cfg.ObservationWindow
	var problems []string
	if v, ok := vpa.Annotations[resize.CanaryAnnotation]; ok {
		if parsed, err := resize.ParseCanary(v); err != nil {
			problems = append(problems, fmt.Sprintf("%v; canary %s used", err, canarySetting))
		} else {
			canarySetting = parsed
		}
	}
	if v, ok := vpa.Annotations[resize.ObservationWindowAnnotation]; ok {
		if parsed, err := resize.ParseObservationWindow(v); err != nil {
			problems = append(problems, fmt.Sprintf("%v; window %s used", err, window))
		} else {
			window = parsed
		}
	}
	problem := ""
	for i, p := range problems {
		if i > 0 {
			problem += "; "
		}
		problem += p
	}
	return canarySetting, window, problem
}

// reportSafetyAnnotation warns once per VPA and value about a safety
// annotation that cannot be read.
func (c *Controller) reportSafetyAnnotation(vpa *vpatypes.VerticalPodAutoscaler, problem string) {
	if problem == "" {
		return
	}
	c.mu.Lock()
	seen := c.safetyWarned[vpa.UID] == problem
	c.safetyWarned[vpa.UID] = problem
	c.mu.Unlock()
	if !seen {
		c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventSafetyAnnotationInvalid, "Annotation not read: %s", problem)
		c.enqueueCondition(vpaKey(vpa))
	}
}

// watchResize shows the pod to its watch: a watch lost with a restart is
// taken up again from its record; the resize sent last begins its watch
// when it is seen completed; harm is acted on, the end of each window
// noted, and the pod is shown again when the next window ends.
func (c *Controller) watchResize(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) {
	owner := ownerOf(vpa)
	key := pod.Namespace + "/" + pod.Name
	_, window, _ := c.safetyOf(vpa)
	if !c.watcher.Watching(pod.UID) {
		c.restoreWatch(pod, vpa, window)
	}
	look, ok := c.watcher.Observe(pod)
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	if look.Started {
		// Per resize, per-event detail: a canary's watch is said at V(2),
		// as the decisions that wait on it are.
		logger.V(watchLogLevel(look.Resize)).Info("Resize completed; watching the pod", "until", look.Until, "canary", look.Resize.Canary)
		if look.Resize.Canary {
			c.canaries.Started(owner, pod.UID, look.Since)
			c.enqueueCondition(vpaKey(vpa))
		}
	}
	for _, e := range look.Dropped {
		if e.Canary {
			c.enqueuePods(c.canaries.Gone(owner, pod.UID))
		}
	}
	for _, e := range look.Passed {
		c.lowerPassed(ctx, pod, vpa, e)
	}
	if look.State == observe.StateHarmed {
		c.harmed(ctx, pod, vpa, look.Resize, look.Harm, true)
	}
	if look.State == observe.StatePassed && len(look.Passed) == 0 {
		logger.V(4).Info("Watched the pod for its window after its resize; no harm")
	}
	if !look.Over && look.After > 0 {
		// 0: nothing but a resize under way, whose next update brings
		// the pod back.
		c.queue.AddAfter(key, look.After)
	}
	if look.Started || look.Over || len(look.Passed)+len(look.Dropped) > 0 || look.State == observe.StateHarmed {
		c.saveWatch(owner, pod.UID)
	}
}

// lowerPassed notes that a lowering's window ended without harm: a
// canary's lets the pods waiting for it go once every canary has passed.
func (c *Controller) lowerPassed(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, e observe.Ended) {
	klog.FromContext(ctx).V(watchLogLevel(e.Resize)).Info("Watched the pod for its window after its resize lowered values; no harm",
		"lowered", e.To.String(), "since", e.Since, "canary", e.Canary)
	if !e.Canary {
		return
	}
	waiting := c.canaries.Passed(ownerOf(vpa), pod.UID, resize.Current(pod, e.To))
	if len(waiting) > 0 {
		c.recorder.Eventf(vpa, corev1.EventTypeNormal, report.EventResizeCanaryPassed,
			"Canary %s watched for %s without harm; the decrease goes to the other pods", pod.Name, e.Until.Sub(e.Since))
	}
	c.enqueuePods(waiting)
	c.enqueueCondition(vpaKey(vpa))
}

// watchLogLevel is the verbosity of the start and the end of a watch after
// a resize: 2 for a canary's (the decrease of its VPA waits on it), 4 for
// any other (an event's detail; the vpa_inplace_updater_resizes_watched
// gauge counts the pods watched).
func watchLogLevel(r observe.Resize) int {
	if r.Canary {
		return 2
	}
	return 4
}

// harmed acts on harm seen after a resize: values it lowered are held for
// the VPA, and the pod (when it is still there) is due a revert, which the
// decision that follows sends; after a resize that only raised values, or
// started or ended a boost (at startup or after a restart), the harm is
// reported.
func (c *Controller) harmed(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, r observe.Resize, h resize.Harm, podLeft bool) {
	logger := klog.FromContext(ctx)
	to, from := resize.Lowered(r.From, r.To)
	if len(to) == 0 || r.ReportOnly {
		what := "lowered nothing"
		if r.ReportOnly {
			what = "started or ended a CPU boost"
		}
		c.metrics.Harmed(h.Kind, false)
		logger.Info("Harm after a resize that "+what+"; reported, not reverted", "harm", h.Kind, "message", h.Message)
		c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventResizeHarmed,
			"%s after the resize to %s, which %s: reported, not reverted", capitalize(h.Message), r.To.String(), what)
		c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventResizeHarmed,
			"Pod %s: %s after the resize to %s, which %s: reported, not reverted", pod.Name, h.Message, r.To.String(), what)
		return
	}
	c.metrics.Harmed(h.Kind, true)
	owner := ownerOf(vpa)
	c.enqueuePods(c.canaries.Harmed(owner, canary.Harm{Pod: pod.UID, Name: pod.Name, From: from, To: to, Why: h.Message}, podLeft))
	hold, _ := c.canaries.Hold(owner)
	ends := ""
	if hold != nil {
		ends = c.canaries.HoldEnds(hold).UTC().Format(time.RFC3339)
	}
	then := "it is resized back in place to " + from.String()
	if !podLeft {
		then = "the pod is gone"
	}
	logger.Info("Harm after a resize that lowered values; reverting, and holding the values for the VPA", "harm", h.Kind,
		"message", h.Message, "lowered", to.String(), "from", from.String(), "holdUntil", ends)
	c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventResizeHarmed,
		"%s after its resize lowered %s (from %s): %s, and no pod of the VPA is lowered to those values or below until the recommendation rises above them, or %s",
		capitalize(h.Message), to.String(), from.String(), then, ends)
	c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventResizeHarmed,
		"Pod %s: %s after its resize lowered %s (from %s): %s; no pod of the VPA is lowered to those values or below until the recommendation rises above them, or %s",
		pod.Name, h.Message, to.String(), from.String(), then, ends)
	c.enqueueCondition(vpaKey(vpa))
}

// revertDue returns, for a pod due a revert after harm, what to resize it
// back to and why; nil when none is due (a revert that is moot, the pod
// already back above what it was lowered from, is forgotten).
func (c *Controller) revertDue(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (recommendation.Desired, string) {
	from, _, why, ok := c.canaries.Revert(ownerOf(vpa), pod.UID)
	if !ok {
		return nil, ""
	}
	back := resize.RevertDesired(resize.Current(pod, from), from)
	if back == nil {
		c.canaries.Reverted(pod.UID)
		return nil, ""
	}
	desired := recommendation.Desired{}
	for name, r := range back {
		desired[name] = recommendation.Container{Requests: r.Requests, Limits: r.Limits}
	}
	return desired, why
}

// liftHold tells the gate what the VPA now recommends for the pod: held
// values it has risen above are no longer held.
func (c *Controller) liftHold(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, desired recommendation.Desired) {
	if len(desired) == 0 {
		return
	}
	c.canaries.Lift(ownerOf(vpa), func() resources.Resources { return resize.Target(pod, desired) })
}

// admitDecrease asks the gate which decreases of a resize may go now (the
// canary gate of the pod path, canarygate.go, asks it of every resize that
// lowers a value and is neither a revert nor a boost's). When it holds some
// back, the decision is taken again with its gate. canary tells that the pod
// was admitted as a canary: its place is held until the resize is sent, or
// released (releaseCanary).
func (c *Controller) admitDecrease(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, in *resize.Input, d resize.Decision) (resize.Decision, bool, time.Time) {
	if d.Action != resize.ActionPatch {
		return d, false, time.Time{}
	}
	to, _ := resize.Lowered(resize.Current(pod, d.Target), d.Target)
	if len(to) == 0 {
		return d, false, time.Time{}
	}
	canarySetting, window, problem := c.safetyOf(vpa)
	c.reportSafetyAnnotation(vpa, problem)
	pods := 1
	if canarySetting.Of(2) > 0 {
		// Counted only when a canary may apply: the VPA's pods in the
		// cache (its target is resolved once and kept).
		n, err := c.countVPAPods(ctx, vpa)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Cannot count the VPA's pods; the decrease waits as for a canary", "err", err)
			n = 2
		}
		pods = n
	}
	v := c.canaries.Admit(canary.Request{Owner: ownerOf(vpa), Pod: pod.UID, Key: pod.Namespace + "/" + pod.Name, Name: pod.Name,
		To: to, Pods: pods, Canary: canarySetting, Window: window})
	if v.Gate == nil {
		return d, v.Canary, v.Until
	}
	in.Gate = v.Gate
	return resize.Decide(*in), v.Canary, v.Until
}

// countVPAPods counts the VPA's pods in the cache that are not being
// deleted.
func (c *Controller) countVPAPods(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (int, error) {
	pods, err := c.podsOfVPA(ctx, vpa)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// releaseCanary gives back the place a sync took as a canary and did not
// use (withheld, refused, waiting for a budget or for room). A place whose
// resize was sent is kept.
func (c *Controller) releaseCanary(vpa *vpatypes.VerticalPodAutoscaler, uid types.UID) {
	c.canaries.Release(ownerOf(vpa), uid)
}

// resizeSent starts the watch of a resize accepted (or whose answer was
// lost: it may have been applied), reports a canary's (canary: the canary
// gate noted it sent) and a revert. Harm after a boost's start or end
// (boost) is only reported: the end of a boost lowers CPU by design.
func (c *Controller) resizeSent(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, d resize.Decision, canary, boost bool) {
	owner := ownerOf(vpa)
	current := resize.Current(pod, d.Target)
	_, window, _ := c.safetyOf(vpa)
	r := observe.Resize{VPA: vpaKey(vpa), VPAUID: vpa.UID, Name: pod.Name, From: current, To: d.Target, Window: window, ReportOnly: boost,
		Before: resize.BaselineOf(pod), Restarts: resize.RestartedBy(pod, current, d.Target)}
	if to, _ := resize.Lowered(current, d.Target); len(to) > 0 && canary {
		r.Canary = true
		c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventResizeCanary,
			"Canary of the VPA's decrease: resized in place to %s; the other pods get it once this one has been watched for %s without harm", d.Target.String(), window)
		c.recorder.Eventf(vpa, corev1.EventTypeNormal, report.EventResizeCanary,
			"Pod %s is the canary of a decrease to %s; the other pods get it once it has been watched for %s without harm", pod.Name, to.String(), window)
		c.enqueueCondition(vpaKey(vpa))
	}
	for _, e := range c.watcher.Sent(pod.UID, r) {
		if e.Canary {
			c.enqueuePods(c.canaries.Gone(owner, pod.UID))
		}
	}
	defer c.saveWatch(owner, pod.UID)
	if d.Reason == resize.ReasonRevert {
		c.canaries.Reverted(pod.UID)
		c.metrics.Reverted()
		klog.FromContext(ctx).Info("Resized back after harm", "target", d.Target.String())
		c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventResizeReverted, "Resized back in place to %s after harm: %s", d.Target.String(), d.Message)
		c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventResizeReverted, "Pod %s resized back in place to %s after harm: %s", pod.Name, d.Target.String(), d.Message)
		c.enqueueCondition(vpaKey(vpa))
	}
}

// waitingForCanary reports, once per pod and message, a decrease waiting
// for the VPA's canaries or held after harm, and looks at the pod again
// when the canaries' windows end.
func (c *Controller) waitingForCanary(pod *corev1.Pod, d resize.Decision, until time.Time) {
	key := pod.Namespace + "/" + pod.Name
	if !until.IsZero() {
		if wait := until.Sub(c.now()); wait > 0 {
			c.queue.AddAfter(key, wait)
		}
	}
	reason := report.EventResizeWaitingForCanary
	if d.Reason == resize.ReasonHeldAfterHarm {
		reason = report.EventResizeHeldAfterHarm
	}
	if c.tracker.Once(pod.UID, noteCanary, d.Gated) {
		c.recorder.Eventf(pod, corev1.EventTypeNormal, reason, "Decrease to %s not made now: %s", d.Target.String(), d.Gated)
	}
}

// enqueuePods queues pods by key.
func (c *Controller) enqueuePods(keys []string) {
	for _, key := range keys {
		c.enqueuePod(key)
	}
}

// podGone ends the watch of a deleted pod. Harm its last state shows (an
// eviction by the kubelet) is acted on by the VPA queue's worker; a
// canary's place is given back.
func (c *Controller) podGone(pod *corev1.Pod) {
	r, h, harmed := c.watcher.Gone(pod)
	if r.VPAUID == "" {
		return
	}
	namespace, name := splitKey(r.VPA)
	c.saveWatch(records.Owner{Namespace: namespace, Name: name, UID: r.VPAUID}, pod.UID)
	if harmed {
		c.mu.Lock()
		c.goneHarms[r.VPA] = append(c.goneHarms[r.VPA], goneHarm{pod: pod, resize: r, harm: h})
		c.mu.Unlock()
		c.vpaQueue.Add(r.VPA)
		return
	}
	c.enqueuePods(c.canaries.Gone(records.Owner{Namespace: namespace, Name: name, UID: r.VPAUID}, pod.UID))
}

// goneHarm is harm a deleted pod's last state showed.
type goneHarm struct {
	pod    *corev1.Pod
	resize observe.Resize
	harm   resize.Harm
}

// settleGoneHarms acts on the harm deleted pods of a VPA showed.
func (c *Controller) settleGoneHarms(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) {
	c.mu.Lock()
	harms := c.goneHarms[vpaKey(vpa)]
	delete(c.goneHarms, vpaKey(vpa))
	c.mu.Unlock()
	for _, g := range harms {
		if g.resize.VPAUID != vpa.UID {
			continue
		}
		logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KObj(g.pod))
		c.harmed(klog.NewContext(ctx, logger), g.pod, vpa, g.resize, g.harm, false)
	}
}

// dropGoneHarms frees the harm deleted pods of a VPA showed when the VPA is
// gone or no longer InPlace: nothing will act on it.
func (c *Controller) dropGoneHarms(ctx context.Context, key string) {
	c.mu.Lock()
	n := len(c.goneHarms[key])
	delete(c.goneHarms, key)
	c.mu.Unlock()
	if n > 0 {
		klog.FromContext(ctx).V(2).Info("Harm of deleted pods not acted on: their VPA is gone or no longer InPlace", "vpa", key, "harms", n)
	}
}

// safetySummary is what the VPA's condition says of the gate and of its
// annotations.
func (c *Controller) safetySummary(vpa *vpatypes.VerticalPodAutoscaler) (reverted, canaryStatus, invalid string) {
	s := c.canaries.StatusOf(ownerOf(vpa))
	if s.Hold != nil {
		reverted = fmt.Sprintf("harm after a resize lowered values (%s); no pod of the VPA is lowered to %s or below until the recommendation rises above it, or %s",
			s.Hold.Message, s.Hold.Attempted.String(), s.HoldEnds.UTC().Format(time.RFC3339))
	}
	if _, _, problem := c.safetyOf(vpa); problem != "" {
		invalid = "Annotation not read: " + problem
	}
	return reverted, s.Canary, invalid
}

func splitKey(key string) (string, string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// watchedPodChange tells whether an update of a watched pod may show harm
// the decision's own relevantPodChange does not look at: a container's
// restarts, its last termination or its state, the pod's status reason,
// its DisruptionTarget condition.
func (c *Controller) watchedPodChange(old, pod *corev1.Pod) bool {
	if old.ResourceVersion == pod.ResourceVersion || !c.watcher.Watching(pod.UID) {
		return false
	}
	if old.Status.Reason != pod.Status.Reason || disruptionTarget(old) != disruptionTarget(pod) {
		return true
	}
	for _, lists := range [][2][]corev1.ContainerStatus{
		{old.Status.ContainerStatuses, pod.Status.ContainerStatuses},
		{old.Status.InitContainerStatuses, pod.Status.InitContainerStatuses},
	} {
		if len(lists[0]) != len(lists[1]) {
			return true
		}
		for i := range lists[1] {
			a, b := &lists[0][i], &lists[1][i]
			if a.RestartCount != b.RestartCount || (a.State.Terminated == nil) != (b.State.Terminated == nil) ||
				(a.LastTerminationState.Terminated == nil) != (b.LastTerminationState.Terminated == nil) {
				return true
			}
		}
	}
	return false
}

// disruptionTarget returns the reason of a pod's DisruptionTarget condition
// when it is True, "" otherwise.
func disruptionTarget(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}
