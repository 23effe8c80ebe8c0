package boost

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
)

// Boosts after a restart. A container with a boost policy that restarts
// (a crash, an OOM kill) once its startup boost is over starts again: it is
// boosted again, in place, as at the pod's creation, and unboosted as at
// startup. Nothing is written to remember it: everything is read from the
// pod, so that it survives a restart or a change of leader of the updater
// and needs no write beyond the resizes.
//
//   - The restart: the container's restartCount (r >= 1) and the start time
//     of its running instance (state.running.startedAt, S).
//   - The window: while the pod is not Ready, then until Ready + the
//     boost's duration, Ready being the later of the Ready condition's last
//     transition to True and S: the rule of the startup boost.
//   - Boosted or not: a container counts as boosted when its CPU request is
//     at least halfway from its recommendation to the boosted value, which
//     is recomputed from the recommendation now. A recommendation that moves
//     a little during the window neither boosts a container twice nor takes
//     a boost for its absence.
//   - The bound: a container that restarted more than maxRestarts times in
//     its pod's life is failing repeatedly: its restarts are not boosted any
//     more (backed off), and a boost it still has is taken back at once.
//
// A container without a CPU recommendation is not boosted again: nothing
// would tell what to take it back to (the startup boost has its annotation
// for that; a restart has none). Nor is a container of a pod that still
// carries startup boost annotations: the startup boost is not over, and its
// own window already counts from the pod's last Ready transition.

// RestartInput is what the boosts of a pod's restarted containers depend on.
type RestartInput struct {
	Pod *corev1.Pod
	VPA *vpatypes.VerticalPodAutoscaler
	// Desired is what the VPA recommends for the pod, processed.
	Desired recommendation.Desired
	// MaxRestarts is the bound: restarts beyond it are not boosted; 0 turns
	// boosts after a restart off (the plan is empty).
	MaxRestarts int32
	Now         time.Time
}

// RestartedContainer is one container the plan names.
type RestartedContainer struct {
	Name string
	// Restarts is its restart count.
	Restarts int32
	// Started is when its running instance started.
	Started time.Time
	// Until is when the boost of its running instance ends; zero while the
	// pod is not Ready.
	Until time.Time
	// CPU is the CPU request it is boosted to (Boost, Lasting).
	CPU resource.Quantity
}

// RestartPlan is what to do with the boosts of a pod's restarted containers.
type RestartPlan struct {
	// Boost are the containers to boost now: their CPU goes up in this
	// resize.
	Boost []RestartedContainer
	// Lasting are the containers boosted whose boost is not over.
	Lasting []RestartedContainer
	// End are the containers whose boost is over and whose CPU goes back to
	// the recommendation in this resize.
	End []RestartedContainer
	// BackedOff are the containers that restarted more than MaxRestarts
	// times, within what would have been their boost: not boosted.
	BackedOff []RestartedContainer
	// Desired is what the pod is resized to when Boost or End is not empty:
	// the boosted CPU of Boost, the recommendation of End, nothing of the
	// other containers (they keep what they have).
	Desired recommendation.Desired
	// Next is how long until the earliest end of a boost, or of what would
	// have been the boost of a container backed off; 0 when no end is known.
	Next time.Duration
}

// Resizes tells whether the plan sends a resize (a boost starts or ends).
func (p RestartPlan) Resizes() bool { return len(p.Boost) > 0 || len(p.End) > 0 }

// Holds tells whether the pod is not otherwise resized now: a boost lasts
// and none starts or ends.
func (p RestartPlan) Holds() bool { return !p.Resizes() && len(p.Lasting) > 0 }

// Empty tells whether the plan names no container.
func (p RestartPlan) Empty() bool {
	return !p.Resizes() && len(p.Lasting) == 0 && len(p.BackedOff) == 0
}

// RestartEndGrace is how long after a boost's end (or, for a container
// backed off, after its restart) taking back a CPU still boosted counts as
// the end of a boost: any change is worth the resize, it reverses no
// resize. Later, the pod is resized as any other. At least a minute, else
// the boost's duration.
func RestartEndGrace(duration time.Duration) time.Duration {
	return max(duration, time.Minute)
}

// Restarts plans the boosts of the restarted containers of a pod.
func Restarts(in RestartInput) RestartPlan {
	var plan RestartPlan
	if in.MaxRestarts <= 0 || Active(in.Pod) {
		return plan
	}
	statuses := map[string]*corev1.ContainerStatus{}
	for i := range in.Pod.Status.ContainerStatuses {
		s := &in.Pod.Status.ContainerStatuses[i]
		statuses[s.Name] = s
	}
	readySince, ready := podReadySince(in.Pod)
	for i := range in.Pod.Spec.Containers {
		c := &in.Pod.Spec.Containers[i]
		st := statuses[c.Name]
		if st == nil || st.RestartCount < 1 || st.State.Running == nil || For(in.VPA, c.Name) == nil {
			continue
		}
		want, ok := in.Desired[c.Name]
		rec, hasRec := want.Requests[corev1.ResourceCPU]
		if !ok || !hasRec || rec.IsZero() {
			continue
		}
		started := st.State.Running.StartedAt.Time
		rc := RestartedContainer{Name: c.Name, Restarts: st.RestartCount, Started: started}
		open := !ready
		if !open {
			rc.Until = later(readySince, started).Add(Duration(in.VPA, c.Name))
		}
		inWindow := open || in.Now.Before(rc.Until)
		ends := func(from time.Time) bool {
			return in.Now.Before(from.Add(RestartEndGrace(Duration(in.VPA, c.Name))))
		}
		out := Apply(Input{VPA: in.VPA, Container: c, Requests: want.Requests, Limits: want.Limits})
		cur := c.Resources.Requests.Cpu()
		boosted := out.Boosted && halfway(*cur, rec, out.Requests[corev1.ResourceCPU])
		if st.RestartCount > in.MaxRestarts {
			if inWindow {
				plan.BackedOff = append(plan.BackedOff, rc)
				plan.next(in.Now, rc.Until)
			}
			if boosted && (inWindow || ends(rc.Until)) {
				plan.End = append(plan.End, rc)
				plan.desire(c.Name, want)
			}
			continue
		}
		switch {
		case inWindow && out.Boosted && boosted:
			rc.CPU = out.Requests[corev1.ResourceCPU]
			plan.Lasting = append(plan.Lasting, rc)
		case inWindow && out.Boosted:
			rc.CPU = out.Requests[corev1.ResourceCPU]
			plan.Boost = append(plan.Boost, rc)
			cpu := recommendation.Container{Requests: corev1.ResourceList{corev1.ResourceCPU: rc.CPU.DeepCopy()}}
			if _, controlled := want.Limits[corev1.ResourceCPU]; controlled {
				if lim, ok := out.Limits[corev1.ResourceCPU]; ok {
					cpu.Limits = corev1.ResourceList{corev1.ResourceCPU: lim.DeepCopy()}
				}
			}
			plan.desire(c.Name, cpu)
		case !inWindow && boosted && ends(rc.Until):
			plan.End = append(plan.End, rc)
			plan.desire(c.Name, want)
		}
		if out.Boosted && inWindow {
			plan.next(in.Now, rc.Until)
		}
	}
	for _, l := range [][]RestartedContainer{plan.Boost, plan.Lasting, plan.End, plan.BackedOff} {
		sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	}
	return plan
}

// next brings Next forward to until, when known (the pod is Ready).
func (p *RestartPlan) next(now, until time.Time) {
	if until.IsZero() {
		return
	}
	if left := until.Sub(now); p.Next == 0 || left < p.Next {
		p.Next = left
	}
}

func (p *RestartPlan) desire(name string, c recommendation.Container) {
	if p.Desired == nil {
		p.Desired = recommendation.Desired{}
	}
	p.Desired[name] = c
}

// halfway tells whether cur is at least halfway from rec up to boosted.
func halfway(cur, rec, boosted resource.Quantity) bool {
	if boosted.Cmp(rec) <= 0 {
		return false
	}
	mid := rec.MilliValue() + (boosted.MilliValue()-rec.MilliValue()+1)/2
	return cur.MilliValue() >= mid
}

// podReadySince is the last transition of the pod's Ready condition to
// True; ok is false when the pod is not Ready.
func podReadySince(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time, c.Status == corev1.ConditionTrue
		}
	}
	return time.Time{}, false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
