package updater

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// The pod path: sync reads the caches, lets pkg/resize decide, runs the
// gates (gates.go), and act carries the decision out.

// sync handles one pod: read the caches, decide, act, report. A returned
// error is retried with backoff; permanent outcomes are recorded instead.
func (c *Controller) sync(ctx context.Context, key string) error {
	if !c.recordsLoaded.Load() {
		return errRecordsNotLoaded
	}
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
	// First, whatever its VPA: a restart found under way at start may be
	// any pod's, and its place ends only when it is observed.
	c.observeRestart(ctx, pod)

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
	if behind, overdue := c.tracker.CacheLag(pod.UID, cachedVersion, start); behind {
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
		c.metrics.StaleCacheRead()
		logger.V(2).Info("Cache has not seen the resize sent; deciding on the pod read from the API server", "cachedVersion", pod.ResourceVersion, "resourceVersion", live.ResourceVersion)
		pod = live
		c.observeRestart(ctx, pod)
	}

	// The watch after a resize first: harm it finds makes the pod due a
	// revert, decided below.
	c.watchResize(ctx, pod, vpa)

	status := resize.ReadStatus(pod)
	desired, err := c.calc.ForPod(pod, vpa)
	if err != nil {
		c.report(ctx, pod, vpa, state.Pod{State: state.PodError, Message: "cannot compute what the pod should get: " + err.Error()}, status)
		return fmt.Errorf("computing recommendation: %w", err)
	}
	c.reportIgnoredInitContainers(ctx, pod, vpa)
	var end *boostEnd
	var again *restartBoost
	if c.boostEnabled() && boost.Active(pod) {
		var held bool
		if desired, end, held = c.startupBoost(ctx, pod, vpa, desired, status); held {
			return nil
		}
	} else if c.boostEnabled() {
		var held bool
		if desired, again, held = c.restartBoost(ctx, pod, vpa, desired, status); held {
			return nil
		}
	}
	reverting := ""
	if end == nil {
		if back, why := c.revertDue(pod, vpa); back != nil {
			desired, reverting = back, why
		} else {
			c.liftHold(pod, vpa, desired)
		}
	}
	// Only the records held for this VPA: one held for another is not
	// believed, and forgotten (records.Store.GetFor).
	record, _ := c.store.GetFor(ownerOf(vpa), pod.UID)
	memRecord, _ := c.memStore.GetFor(ownerOf(vpa), pod.UID)
	a := &attempt{pod: pod, vpa: vpa, boost: reverting == "" && (end != nil || again.resizes()), in: resize.Input{
		Pod:               pod,
		Desired:           desired,
		Record:            record,
		Threshold:         c.cfg.Threshold,
		ServerMinor:       c.cfg.ServerMinor,
		DisruptionAllowed: true,
		MemoryRecord:      memRecord,
		MemoryLimitMargin: c.cfg.MemoryLimitMargin,
		LastResize:        c.tracker.LastResize(pod.UID),
		ReversalHold:      c.cfg.ReversalHold,
		Now:               c.now(),
		Revert:            reverting,
		JVM:               c.jvmOf(ctx, pod, vpa),
	}}
	a.in.NodeFeatures, a.in.NodeKnown = c.nodeFeatures(pod)
	if c.usage != nil && resize.NeedsMemoryUsage(pod, desired, c.cfg.ServerMinor) {
		// Never blocks a resize: without usage, memory limits are lowered
		// as recommended and the kubelet's own check is the last line.
		u, err := c.usage.MemoryUsage(ctx, pod)
		if err != nil {
			logger.V(2).Info("Memory in use unknown; a memory limit is lowered without it", "err", err)
		}
		a.in.MemoryUsage = u
	}
	if a.boost {
		// Starting or ending a boost: any change is worth the resize (a
		// Factor 1.1 boost is below the threshold), and it reverses no
		// resize of ours.
		a.in.Threshold, a.in.LastResize = -1, nil
	}
	// The gates (gates.go), in their one order: what is held back before
	// the decision, the decision, then the gates that answer for the
	// resize to send, each taking what it holds. act sends it, and every
	// gate passed is told what became of it.
	c.gates.Hold(ctx, a)
	a.decide()
	verdict, ticket := c.admit(ctx, a)
	d := a.d
	c.metrics.Decided(d, c.now().Sub(start))
	outcome, _ := c.tracker.Settle(pod.UID, status.State, func(like resources.Resources) resources.Resources { return resize.Current(pod, like) })
	c.metrics.Settled(outcome)
	logger.V(decisionLogLevel(d)).Info("Decided", "vpa", klog.KObj(vpa), "action", d.Action, "reason", d.Reason, "message", d.Message)
	st, sent, err := c.act(ctx, pod, cachedVersion, vpa, d, status, verdict)
	ticket.Done(ctx, sent)
	if sent.MayApply() {
		c.resizeSent(ctx, pod, vpa, d, a.canarySent, a.boost)
	}
	if st != nil && st.State == state.PodWithheld && a.Class().Revert {
		// The condition says the revert waits for the switch.
		st.Kind = records.KindRevert
	}
	if st != nil && a.budget != nil {
		st.Values = a.budget.Blocker
	}
	if st != nil && st.State == state.PodWaitingForNode {
		st.Values = pod.Spec.NodeName
	}
	if st != nil {
		*st = c.flooredState(pod, desired, again.state(*st))
		c.report(ctx, pod, vpa, *st, status)
	}
	c.reportFloored(ctx, pod, vpa, d, desired)
	if d.Gated != "" {
		// After the report: the pod's state is the one its note is kept
		// with.
		c.waitingForCanary(pod, d, a.canaryUntil)
	}
	if verdict.Answer != gate.Pass && !verdict.Until.IsZero() {
		// Decided again when the gate's answer may change (a freeze ends).
		if wait := verdict.Until.Sub(c.now()); wait > 0 {
			c.queue.AddAfter(pod.Namespace+"/"+pod.Name, wait)
		}
	}

	if again != nil && err == nil {
		c.reportRestartBoost(ctx, pod, vpa, d, st, again)
	}
	if end != nil && err == nil && endsBoost(d, st) {
		err = c.finishBoost(ctx, pod, vpa, d, end)
	}
	if a.budget != nil {
		c.waitForBudget(pod, *a.budget)
	}
	c.reportHeld(ctx, pod, d)
	if d.RecheckAfter > 0 && d.Action != resize.ActionPatch {
		// Decided again when the hold ends, not at the next resync only.
		c.queue.AddAfter(pod.Namespace+"/"+pod.Name, d.RecheckAfter)
	}
	if st != nil && st.State == state.PodWaitingForNode && c.tracker.Once(pod.UID, noteWaiting, "node "+pod.Spec.NodeName) {
		if reverting != "" {
			c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventResizeRevertWaiting,
				"Revert after harm not sent: %s: the node has filled since the pod was lowered; it is sent once the node has room", d.Message)
		} else {
			c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventResizeWaitingForNodeCapacity,
				"Resize not sent: %s; it is sent once the node has room (%s: %s on the VPA)", d.Message, ResizeWhenAnnotation, ResizeWhenFitsNode)
		}
	}
	return err
}

// act carries out a decision, as the gates answered for it (v), and
// returns the pod's resulting state (nil when the pod is gone) and what
// became of the resize. cachedVersion is the pod's version in the cache
// (pod may have been read from the API server instead).
func (c *Controller) act(ctx context.Context, pod *corev1.Pod, cachedVersion string, vpa *vpatypes.VerticalPodAutoscaler, d resize.Decision, rs resize.Status, v gate.Verdict) (*state.Pod, gate.Outcome, error) {
	logger := klog.FromContext(ctx)
	owner := ownerOf(vpa)
	if d.ClearRecord {
		c.store.Delete(pod.UID)
	}
	if d.NewRecord != nil {
		d.NewRecord.RecordedAt = c.now()
		c.store.Put(owner, pod.UID, d.NewRecord)
		c.reportRecord(ctx, pod, vpa, d.NewRecord)
		// The resize the pod holds cannot be applied: nothing restarts.
		c.releaseRestart(pod, disruption.EndRecorded)
	}
	if d.NewMemoryRecord != nil {
		d.NewMemoryRecord.RecordedAt = c.now()
		c.memStore.Put(owner, pod.UID, d.NewMemoryRecord)
		c.reportMemoryRecord(ctx, pod, vpa, d)
	}
	if d.Action != resize.ActionPatch {
		record, _ := c.store.GetFor(owner, pod.UID)
		memRecord, _ := c.memStore.GetFor(owner, pod.UID)
		st := stateOf(d, record, memRecord, rs)
		return &st, gate.NotSent, nil
	}

	if v.Answer == gate.Refuse {
		// Withheld (paused, frozen, dry run): nothing is sent. A revert
		// stays due.
		c.metrics.WithheldResize(v.Reason)
		logger.V(2).Info("Resize not sent", "target", d.Target.String(), "why", v.Why, "gate", v.Gate)
		return &state.Pod{State: state.PodWithheld, Values: d.Target.String(), Message: v.Why}, gate.NotSent, nil
	}

	// A replica sends for the namespaces of the shards it holds only, and
	// only while it holds them for as long as the patch may take. Refused,
	// the pod is retried and nothing is reported: the VPA's condition is the
	// shard holder's to write, and a fence closed while a renewal is slow
	// says nothing about the pod.
	pctx, done, err := c.fenced(ctx, pod.Namespace)
	if err != nil {
		logger.V(2).Info("Resize not sent", "target", d.Target.String(), "err", err)
		return nil, gate.NotSent, err
	}
	patched, err := c.client.CoreV1().Pods(pod.Namespace).Patch(pctx, pod.Name, types.StrategicMergePatchType, d.Patch, metav1.PatchOptions{}, "resize")
	done()
	outcome := resize.ClassifyPatchError(err)
	c.metrics.Patched(outcome)
	sent := gate.Refused
	switch {
	case outcome == resize.OutcomeAccepted:
		sent = gate.Sent
	case resize.MayHaveApplied(err):
		// The answer was lost, not the patch: the pod may restart, and take
		// its new room. What the gates took is kept until the pod shows
		// what happened, or a patch sent again is answered.
		sent = gate.Lost
		logger.Info("Answer to a resize lost; what it reserved is kept until the pod shows whether it was applied", "disruptive", d.Disruptive, "err", err)
	}
	switch outcome {
	case resize.OutcomeAccepted:
		c.store.Delete(pod.UID)
		if d.ClearMemoryRecord {
			c.memStore.Delete(pod.UID)
		}
		now := c.now()
		c.tracker.MarkSent(pod.UID, vpaKey(vpa), pod.Name, resize.CurrentRequests(pod, d.Target), d.Target, now)
		// A patch that changed nothing brings no update event.
		if patched == nil || patched.ResourceVersion != pod.ResourceVersion {
			sentVersion := ""
			if patched != nil {
				sentVersion = patched.ResourceVersion
			}
			c.tracker.AwaitUpdate(pod.UID, cachedVersion, sentVersion, now)
		}
		c.mu.Lock()
		seen, ok := c.recommendationSeen[vpa.UID]
		c.mu.Unlock()
		if ok {
			c.metrics.RecommendationApplied(now.Sub(seen))
		}
		message := "resize sent"
		if len(d.Held) > 0 {
			message += "; " + resize.DescribeHeld(d.Held)
		}
		// What a raise gives a JVM's heap (nothing until it restarts).
		heap := strings.Join(d.HeapNotes, "; ")
		if heap != "" {
			message += "; " + heap
			heap = "; " + heap
		}
		logger.Info("Resize sent", "target", d.Target.String(), "disruptive", d.Disruptive, "reason", d.Reason, "kept", resize.DescribeHeld(d.Held))
		if len(d.Held) > 0 {
			c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventResizeSent, "Resizing in place to %s; %s%s", d.Target.String(), resize.DescribeHeld(d.Held), heap)
		} else {
			c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventResizeSent, "Resizing in place to %s%s", d.Target.String(), heap)
		}
		return &state.Pod{State: state.PodInProgress, Since: now, Values: d.Target.String(), Message: message}, sent, nil
	case resize.OutcomeNodeCapacity, resize.OutcomeInvalid:
		kind, st := records.KindNodeCapacity, state.PodInfeasible
		if outcome == resize.OutcomeInvalid {
			kind, st = records.KindInvalid, state.PodInvalid
		}
		r := &records.Record{Kind: kind, Attempted: d.Target, Message: statusMessage(err), RecordedAt: c.now()}
		c.store.Put(owner, pod.UID, r)
		c.reportRecord(ctx, pod, vpa, r)
		return &state.Pod{State: st, Since: r.RecordedAt, Values: r.Attempted.String(), Message: r.Message, Kind: r.Kind}, sent, nil
	case resize.OutcomeGone:
		c.untrack(pod.UID)
		return nil, sent, nil
	default:
		err = fmt.Errorf("resize patch (%s): %w", outcome, err)
		if c.queue.NumRequeues(pod.Namespace+"/"+pod.Name) < quietTransientFailures {
			// A blip (a timeout, a 429 from an API server under load) is
			// retried with backoff before the VPA hears of it: only a patch
			// that keeps failing is reported.
			return nil, sent, err
		}
		return &state.Pod{State: state.PodError, Message: err.Error()}, sent, err
	}
}

// quietTransientFailures is how many transient failures in a row of a
// pod's resize patch are retried before its VPA reports ResizeError: the
// third is reported, after the pod queue's backoff of 200 ms and 400 ms.
const quietTransientFailures = 2

// errRecordsNotLoaded: a pod or Job is not decided before the records of
// earlier attempts are loaded; a resize recorded as infeasible before a
// restart or a change of leader is not sent again. Run starts its workers
// only once they are; this holds whoever calls sync.
var errRecordsNotLoaded = errors.New("records of earlier attempts not loaded yet")

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

// decisionLogLevel is the verbosity of a pod's decision: 4 for a pod up to
// date, which is what most updates of most pods come to (an event's detail;
// two thirds of the lines a run of 1,000 resized pods logged at -v=2), 2
// for every other, which says what was done or what waits and why.
func decisionLogLevel(d resize.Decision) int {
	if d.Action == resize.ActionSkip && d.Reason == resize.ReasonUpToDate {
		return 4
	}
	return 2
}
