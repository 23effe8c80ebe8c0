package updater

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Boosts after a restart (boost.Restarts, gate CPUStartupBoost): a
// container that restarts once its startup boost is over is boosted again
// in place and unboosted when the pod has been Ready for the boost's
// duration, up to --startup-boost-max-restarts restarts of the container.
// Everything is read from the pod (restart count, start of the running
// instance, Ready): the updater writes nothing but the resizes, so the
// pods' admission policy is unchanged and a new leader carries on where the
// last one stopped.
//
// The resize that starts or ends such a boost is an ordinary decision
// (records, fits-node, the disruption budget, dry run and pauses apply):
// only its threshold and the reversal hold are set aside, as at the end of
// a startup boost. While a boost lasts, the pod is not otherwise resized.

// restartBoost is what sync carries from the plan to the report.
type restartBoost struct {
	plan boost.RestartPlan
	max  int32
}

// restartBoost plans the boosts of the pod's restarted containers. It
// returns desired as the resize to send when a boost starts or ends, or
// held true when a boost lasts and nothing is to be sent: then the pod's
// state is reported and the pod queued for the boost's end. again is nil
// when no restarted container is concerned.
func (c *Controller) restartBoost(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, desired recommendation.Desired, rs resize.Status) (out recommendation.Desired, again *restartBoost, held bool) {
	now := c.now()
	plan := boost.Restarts(boost.RestartInput{Pod: pod, VPA: vpa, Desired: desired, MaxRestarts: c.cfg.BoostMaxRestarts, Now: now})
	if plan.Empty() {
		return desired, nil, false
	}
	if plan.Next > 0 {
		c.queue.AddAfter(pod.Namespace+"/"+pod.Name, plan.Next)
	}
	again = &restartBoost{plan: plan, max: c.cfg.BoostMaxRestarts}
	switch {
	case plan.Resizes():
		return plan.Desired, again, false
	case plan.Holds():
		first := plan.Lasting[0]
		st := state.Pod{State: state.PodBoosted, Since: first.Started,
			Message: fmt.Sprintf("CPU boosted again after restart %d of %s until the pod has been Ready for the boost's duration", first.Restarts, containerNames(plan.Lasting))}
		if plan.Next > 0 {
			until := now.Add(plan.Next).UTC().Format(time.RFC3339)
			st.Values = until
			st.Message = fmt.Sprintf("CPU boosted again after restart %d of %s until %s", first.Restarts, containerNames(plan.Lasting), until)
		}
		klog.FromContext(ctx).V(4).Info("Boost after a restart lasts; not resized", "containers", containerNames(plan.Lasting), "next", plan.Next)
		c.report(ctx, pod, vpa, st, rs)
		return desired, again, true
	}
	return desired, again, false
}

// containerRestarted tells whether a container of pod restarted or started
// running since old: its restart count or the start of its running instance
// changed. A restart need not change the pod's Ready condition (the kubelet
// may restart the container before the probe fails), and its boost starts
// then.
func containerRestarted(old, pod *corev1.Pod) bool {
	type instance struct {
		restarts int32
		started  time.Time
	}
	before := make(map[string]instance, len(old.Status.ContainerStatuses))
	for _, s := range old.Status.ContainerStatuses {
		before[s.Name] = instance{s.RestartCount, runningSince(s)}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if b, ok := before[s.Name]; !ok || b.restarts != s.RestartCount || !b.started.Equal(runningSince(s)) {
			return true
		}
	}
	return false
}

func runningSince(s corev1.ContainerStatus) time.Time {
	if s.State.Running == nil {
		return time.Time{}
	}
	return s.State.Running.StartedAt.Time
}

// resizes tells whether the decision starts or ends a boost after a restart.
func (a *restartBoost) resizes() bool { return a != nil && a.plan.Resizes() }

// state is the pod's state given what the decision made of it: a pod
// otherwise up to date whose container restarted more than the bound, within
// what would have been its boost, says that it is not boosted.
func (a *restartBoost) state(st state.Pod) state.Pod {
	if a == nil || len(a.plan.BackedOff) == 0 || st.State != state.PodResized {
		return st
	}
	first := a.plan.BackedOff[0]
	return state.Pod{State: state.PodBoostBackedOff, Since: first.Started, Values: containerNames(a.plan.BackedOff),
		Message: fmt.Sprintf("%s restarted %d times, more than %d: its restarts are not boosted", containerNames(a.plan.BackedOff), first.Restarts, a.max)}
}

// reportRestartBoost tells what the decision did with the boosts after a
// restart: events on the pod (and on the VPA for a back-off) and the
// metric, once the resize is accepted.
func (c *Controller) reportRestartBoost(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, d resize.Decision, st *state.Pod, a *restartBoost) {
	logger := klog.FromContext(ctx)
	if len(a.plan.BackedOff) > 0 && c.tracker.OnceWhileTracked(pod.UID, noteBoostBackedOff, containerNames(a.plan.BackedOff)) {
		first := a.plan.BackedOff[0]
		c.metrics.RestartBoost(report.RestartBoostBackedOff)
		logger.Info("Container restarting repeatedly; its restarts are not boosted", "vpa", klog.KObj(vpa), "containers", containerNames(a.plan.BackedOff), "restarts", first.Restarts, "max", a.max)
		msg := fmt.Sprintf("%s restarted %d times, more than %d (--startup-boost-max-restarts): its restarts are not boosted any more in this pod", containerNames(a.plan.BackedOff), first.Restarts, a.max)
		c.recorder.Eventf(pod, corev1.EventTypeWarning, report.EventStartupBoostBackedOff, "CPU startup boost backed off: %s", msg)
		c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventStartupBoostBackedOff, "Pod %s: CPU startup boost backed off: %s", pod.Name, msg)
	}
	if !a.resizes() || d.Action != resize.ActionPatch || st == nil || st.State != state.PodInProgress {
		return
	}
	for _, rc := range a.plan.Boost {
		c.metrics.RestartBoost(report.RestartBoostBoosted)
		logger.Info("Container boosted again after a restart", "vpa", klog.KObj(vpa), "container", rc.Name, "restarts", rc.Restarts, "cpu", rc.CPU.String())
		c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventStartupBoostReapplied,
			"CPU startup boost of %s applied again after its restart %d (at most %d are boosted): resized in place to %s", rc.Name, rc.Restarts, a.max, d.Target.String())
	}
	for _, rc := range a.plan.End {
		c.metrics.RestartBoost(report.RestartBoostEnded)
		logger.Info("Boost after a restart ended", "vpa", klog.KObj(vpa), "container", rc.Name, "restarts", rc.Restarts)
		c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventStartupBoostEnded,
			"CPU boost of %s after its restart %d ended: resized in place to %s", rc.Name, rc.Restarts, d.Target.String())
	}
}

// lasting names containers: "app", "app, sidecar".
func containerNames(cs []boost.RestartedContainer) string {
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}
