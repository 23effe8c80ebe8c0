package updater

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// The end of CPU startup boosts (pkg/boost, gate CPUStartupBoost). A pod
// created with boosted CPU, by our admission controller or upstream's,
// carries one vpaCpuStartupBoost/<container> annotation per boosted
// container. While a boost lasts the pod is not otherwise resized. When one
// is due (the pod has been Ready for its durationSeconds) a timer queues
// the pod, which is resized in place to its recommendation (or to the CPU
// the annotation recorded), through the ordinary decision, and then the
// annotations of the boosts that ended are removed.
//
// The removal is a second write, after the resize: the pods/resize
// subresource takes only resources, and the pod itself refuses resource
// changes. In between, the pod carries its annotation with its CPU already
// lowered; if the updater stops there, the next sync finds the boost due,
// nothing left to resize, and removes the annotation.

// boostEnd is what sync carries over from startupBoost to the end of a
// boost.
type boostEnd struct {
	// containers whose boost this sync ends.
	containers []string
	// unreadable holds the errors of annotations that could not be read.
	unreadable []error
}

// startupBoost looks at the boosts of a pod that carries boost
// annotations. It returns desired as the resize that ends the boosts now
// due (boost.EndDesired), with end set, or held true when no boost is due:
// then the pod is not resized, its state is reported, and the pod is queued
// for when the next boost is due.
func (c *Controller) startupBoost(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, desired recommendation.Desired, rs resize.Status) (out recommendation.Desired, end *boostEnd, held bool) {
	now := c.now()
	ended, next := boost.Due(pod, vpa, now)
	if next > 0 {
		// The timer of the next boost to end: the delaying queue keeps the
		// earliest time asked for a pod, so resyncs do not push it back.
		c.queue.AddAfter(pod.Namespace+"/"+pod.Name, next)
	}
	if len(ended) > 0 {
		out, errs := boost.EndDesired(pod, desired, ended)
		return out, &boostEnd{containers: ended, unreadable: errs}, false
	}
	st := state.Pod{State: state.PodBoosted, Since: pod.CreationTimestamp.Time,
		Message: "CPU boosted at startup until the pod has been Ready for the boost's duration"}
	if next > 0 {
		until := now.Add(next).UTC().Format(time.RFC3339)
		st.Values = until
		st.Message = "CPU boosted at startup until " + until
	}
	klog.FromContext(ctx).V(4).Info("Startup boost active; not resized", "next", next)
	c.report(ctx, pod, vpa, st, rs)
	return desired, nil, true
}

// endsBoost tells whether a decision made for a boost end carries it out,
// so that the boost annotations can go: the resize was accepted, or nothing
// is left to send (up to date, below threshold, recorded). A resize that
// waits (in progress, deferred, a budget), is withheld or failed leaves the
// boost in place: the pod is decided again.
func endsBoost(d resize.Decision, st *state.Pod) bool {
	switch d.Action {
	case resize.ActionPatch:
		return st != nil && st.State == state.PodInProgress
	case resize.ActionSkip:
		return d.Reason != resize.ReasonPodNotRunning && d.Reason != resize.ReasonReversalHeld
	}
	return false
}

// finishBoost removes the annotations of the boosts that end, in one merge
// patch that carries the pod's UID as a precondition (a pod of the same
// name created since is left alone), and reports the end.
func (c *Controller) finishBoost(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, d resize.Decision, end *boostEnd) error {
	removed := map[string]any{}
	for _, name := range end.containers {
		removed[boost.AnnotationKey(name)] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID, "annotations": removed}})
	if err != nil {
		return fmt.Errorf("building the boost annotations' removal: %w", err)
	}
	pctx, done, err := c.fenced(ctx, pod.Namespace)
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(pctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	done()
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil // gone, or another pod by now: nothing of ours to remove
	case apierrors.IsForbidden(err):
		// Not granted (an install without the pods admission policy and
		// its RBAC): retrying with backoff cannot help. The resize is done;
		// the removal is tried again when the pod is decided again, and
		// said once for the pod.
		klog.FromContext(ctx).Info("Cannot remove the startup boost annotations; the pod keeps them", "err", err)
		if c.tracker.OnceWhileTracked(pod.UID, noteBoostForbidden, strings.Join(end.containers, ",")) {
			c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventStartupBoostAnnotationForbidden,
				"CPU startup boost of %s ended, but its annotation cannot be removed: %s", strings.Join(end.containers, ", "), statusMessage(err))
		}
		return nil
	case err != nil:
		// The boost stays on record; the pod is decided again with backoff
		// and, its CPU already lowered, only the removal is left to do.
		return fmt.Errorf("removing the startup boost annotations of %s: %w", strings.Join(end.containers, ", "), err)
	}
	lasted := c.now().Sub(pod.CreationTimestamp.Time)
	c.metrics.BoostEnded(lasted)
	to := "its resources unchanged"
	switch {
	case d.Action == resize.ActionPatch:
		to = "resized in place to " + d.Target.String()
	case d.Reason == resize.ReasonUpToDate || d.Reason == resize.ReasonBelowThreshold:
		to = "it already had " + d.Target.String()
	case d.Message != "":
		to += " (" + d.Message + ")"
	}
	klog.FromContext(ctx).Info("Startup boost ended", "vpa", klog.KObj(vpa), "containers", end.containers, "lasted", lasted.Round(time.Second), "decision", d.Reason)
	c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventStartupBoostEnded,
		"CPU startup boost of %s ended %s after the pod's creation: %s", strings.Join(end.containers, ", "), lasted.Round(time.Second), to)
	for _, err := range end.unreadable {
		c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventStartupBoostAnnotationInvalid,
			"%v; the VPA recommends no CPU for it, so it keeps its CPU until it does", err)
	}
	return nil
}

// boostEnabled tells whether the updater ends startup boosts.
func (c *Controller) boostEnabled() bool {
	return c.gate.Enabled(features.CPUStartupBoost)
}
