package resize

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Pods with pod-level resources (spec.resources, KEP-2837), and the resize
// of those values in place (KEP-5419), per Kubernetes version.
//
// The API server validates every resize of such a pod against its pod-level
// values (ValidatePodResize, validatePodResourceConsistency): the
// containers' aggregate requests (init containers and sidecars counted as
// the scheduler counts them) at most the pod-level request, each
// container's limit at most the pod-level limit, a pod-level request at
// most its limit, no pod-level value removed, only cpu and memory changed,
// and the QoS class, which the pod-level values decide, unchanged.
//
//	1.33, 1.34  no pod with pod-level resources can be resized, not even its
//	            containers ("pods with pod-level resources cannot be resized").
//	1.35        only with the alpha gate InPlacePodLevelResourcesVerticalScaling
//	            on, off by default ("resize of pods with pod-level resources is
//	            forbidden when ... disabled"). The API server drops the pod-level
//	            status (allocatedResources, resources) while the gate is off, and
//	            a kubelet without the gate does not write it: a pod whose status
//	            shows it proves both have the gate.
//	1.36, 1.37  on by default (beta). Containers resize within the pod-level
//	            values on any node. The pod-level values themselves change only
//	            on a node that declares the feature
//	            InPlacePodLevelResourcesVerticalScaling: the NodeDeclaredFeatures
//	            admission (beta 1.36, GA 1.37) refuses the change with a 403 and
//	            no cause ("pod update requires features
//	            InPlacePodLevelResourcesVerticalScaling which are not available on
//	            node ..."), and a kubelet without the gate would mark it
//	            Infeasible ("InPlacePodLevelResourcesVerticalScaling is disabled").
//
// Where the pod-level values may change, they follow the containers
// (recommendation.PodLevelFor, the same rule as at admission); where they may
// not, the containers are kept within them (capToPodLevel): what the
// recommendation asks beyond them is not sent, and the decision says so.
// This file plans that for a decision; podlevel_parts.go adds the
// pod-level values to what the rest of the package reads, checks and
// patches.

// FeaturePodLevelResize is the feature a node declares
// (node.status.declaredFeatures) when its kubelet resizes pod-level
// resources in place, and the gate of that resize.
const FeaturePodLevelResize = "InPlacePodLevelResourcesVerticalScaling"

const (
	// ReasonPodLevelCapped: a resize is sent with container values kept
	// within the pod-level values, which cannot change in place.
	ReasonPodLevelCapped Reason = "PodLevelCapped"
	// ReasonPodLevelBound: the recommendation asks for more than the
	// pod-level values allow and they cannot change in place; the containers
	// have all they may get, nothing is sent.
	ReasonPodLevelBound Reason = "PodLevelBound"
)

// podLevelPlan is how a decision treats a pod's pod-level values.
type podLevelPlan struct {
	// set: the pod has pod-level requests or limits.
	set bool
	// refused: the API server's version refuses any resize of the pod
	// (Validate says why).
	refused bool
	// movable: they may change in place; why says why not.
	movable bool
	why     string
	// capped: fit kept container values within the pod-level values;
	// uncapped is what the containers would have got.
	capped   bool
	uncapped resources.Resources
}

// planPodLevel returns how the pod-level values of the decision's pod are
// treated. record is the pod's record of an earlier attempt, if any: one the
// API server or the kubelet refused for want of the pod-level resize feature
// keeps the pod-level values where they are for as long as it lives.
func planPodLevel(in Input, record *records.Record) podLevelPlan {
	pod := in.Pod
	if !recommendation.PodLevelSet(pod) {
		return podLevelPlan{}
	}
	p := podLevelPlan{set: true}
	switch {
	case podLevelVersionRule(pod, in.ServerMinor) != "":
		// Validate refuses the resize; nothing moves.
		p.refused, p.why = true, podLevelVersionRule(pod, in.ServerMinor)
	case record != nil && strings.Contains(record.Message, FeaturePodLevelResize):
		p.why = "changing them was refused before: " + record.Message
	case in.NodeKnown && in.ServerMinor == 35 && len(in.NodeFeatures) == 0:
		// 1.35 without NodeDeclaredFeatures (alpha, off by default): the
		// pod's status (podLevelVersionRule) is the evidence.
		p.movable = true
	case in.NodeKnown:
		p.movable = slices.Contains(in.NodeFeatures, FeaturePodLevelResize)
		if !p.movable {
			p.why = fmt.Sprintf("node %s does not declare the feature %s", pod.Spec.NodeName, FeaturePodLevelResize)
		}
	default:
		p.movable = podLevelStatusShown(pod)
		if !p.movable {
			p.why = "the pod's status shows no pod-level resources: its node may not resize them"
		}
	}
	return p
}

// podLevelVersionRule says why the API server's version refuses any resize
// of pod, "" when it does not (serverMinor 0: unknown, nothing refused).
func podLevelVersionRule(pod *corev1.Pod, serverMinor int) string {
	if !recommendation.PodLevelSet(pod) {
		return ""
	}
	switch {
	case serverMinor == 33 || serverMinor == 34:
		return fmt.Sprintf("pods with pod-level resources cannot be resized in place on Kubernetes 1.%d", serverMinor)
	case serverMinor == 35 && !podLevelStatusShown(pod):
		return "Kubernetes 1.35 resizes pods with pod-level resources only with the alpha gate " + FeaturePodLevelResize +
			" on, and the pod's status shows no pod-level resources (the gate is off on the API server or on the pod's node)"
	}
	return ""
}

// podLevelStatusShown tells whether the pod's status carries its pod-level
// resources, which the kubelet writes and the API server keeps only with
// InPlacePodLevelResourcesVerticalScaling on.
func podLevelStatusShown(pod *corev1.Pod) bool {
	return len(pod.Status.AllocatedResources) > 0 || (pod.Status.Resources != nil && len(pod.Status.Resources.Requests)+len(pod.Status.Resources.Limits) > 0)
}

// fit returns target made consistent with the pod-level values: with the
// pod-level values that follow it (under resources.PodLevel) where they
// may move, with container values kept within them where they may not.
func (p *podLevelPlan) fit(pod *corev1.Pod, target resources.Resources) resources.Resources {
	if !p.set || p.refused {
		return target
	}
	if p.movable {
		return withPodLevel(pod, target)
	}
	capped := capToPodLevel(pod, target)
	if !resources.Equal(capped, target) {
		p.capped, p.uncapped = true, target
	}
	return capped
}

// withPodLevel returns target (without any pod-level entry of its own) with
// the pod-level values that follow its containers.
func withPodLevel(pod *corev1.Pod, target resources.Resources) resources.Resources {
	containers := withoutPodLevel(target)
	lvl := recommendation.PodLevelFor(pod, recommendation.Overlay(pod, containers))
	if lvl == nil {
		return containers
	}
	out := make(resources.Resources, len(containers)+1)
	for name, r := range containers {
		out[name] = r
	}
	out[resources.PodLevel] = cpuMemory(*lvl)
	return out
}

func withoutPodLevel(target resources.Resources) resources.Resources {
	if _, ok := target[resources.PodLevel]; !ok {
		return target
	}
	out := make(resources.Resources, len(target))
	for name, r := range target {
		if name != resources.PodLevel {
			out[name] = r
		}
	}
	return out
}

// capToPodLevel returns target with its container values kept within the
// pod's pod-level values as they are: each container's limit at most the
// pod-level limit (its request at most its limit), and the containers'
// aggregate request at most the pod-level request, the increases the target
// asks being given the same share of what room there is (decreases are
// kept whole). target is not changed.
func capToPodLevel(pod *corev1.Pod, target resources.Resources) resources.Resources {
	lvl := pod.Spec.Resources
	out := copyResources(withoutPodLevel(target))
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if lim, ok := lvl.Limits[r]; ok {
			for name, t := range out {
				if l, ok := t.Limits[r]; ok && l.Cmp(lim) > 0 {
					t.Limits[r] = lim.DeepCopy()
				}
				if l, ok := t.Limits[r]; ok {
					if q, ok := t.Requests[r]; ok && q.Cmp(l) > 0 {
						t.Requests[r] = l.DeepCopy()
					}
				} else if q, ok := t.Requests[r]; ok && q.Cmp(lim) > 0 {
					t.Requests[r] = lim.DeepCopy()
				}
				out[name] = t
			}
		}
		req, ok := lvl.Requests[r]
		if agg := aggregateRequest(pod, out, r); !ok || agg.Cmp(req) <= 0 {
			continue
		}
		// The largest share (in thousandths) of each increase that fits:
		// every value grows with it.
		at := func(share int64) resources.Resources { return shareIncreases(pod, out, r, share) }
		lo, hi := int64(0), int64(1000)
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if agg := aggregateRequest(pod, at(mid), r); agg.Cmp(req) <= 0 {
				lo = mid
			} else {
				hi = mid
			}
		}
		out = at(lo)
	}
	return out
}

// shareIncreases returns target with each increase of r over the pod's
// spec (requests and limits) cut to share thousandths of it.
func shareIncreases(pod *corev1.Pod, target resources.Resources, r corev1.ResourceName, share int64) resources.Resources {
	out := copyResources(target)
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			t, ok := out[c.Name]
			if !ok {
				continue
			}
			cut := func(now corev1.ResourceList, want corev1.ResourceList) {
				cur, has := now[r]
				w, ok := want[r]
				if !ok || !has || w.Cmp(cur) <= 0 {
					return
				}
				want[r] = between(r, cur, w, share)
			}
			cut(c.Resources.Requests, t.Requests)
			cut(c.Resources.Limits, t.Limits)
			out[c.Name] = t
		}
	}
	return out
}

// between is from + (to - from) x share / 1000, rounded down, in the unit
// the API server compares r in.
func between(r corev1.ResourceName, from, to resource.Quantity, share int64) resource.Quantity {
	f, t := unitAmount(r, from), unitAmount(r, to)
	v := f + int64(float64(t-f)*float64(share)/1000)
	if r == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.BinarySI)
}

func unitAmount(r corev1.ResourceName, q resource.Quantity) int64 {
	if r == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// aggregateRequest is the containers' aggregate request of r once pod is
// given target, as the API server counts it against the pod-level request.
func aggregateRequest(pod *corev1.Pod, target resources.Resources, r corev1.ResourceName) resource.Quantity {
	agg := resourcehelper.AggregateContainerRequests(recommendation.Overlay(pod, withoutPodLevel(target)), resourcehelper.PodResourcesOptions{})
	return agg[r]
}

// bound returns the decision to skip the pod when the pod-level values keep
// its containers where they are (fit capped everything the recommendation
// asks away), and whether it applies. Its Target is what the recommendation
// asks, which cannot be had in place.
func (p *podLevelPlan) bound(pod *corev1.Pod, d Decision, current, target resources.Resources) (Decision, bool) {
	if !p.capped || !resources.Equal(current, target) {
		return d, false
	}
	d.Target = p.uncapped
	return d.with(ActionSkip, ReasonPodLevelBound, "nothing to resize: "+p.cappedMessage(pod)), true
}

// cappedMessage says what a capped resize left out.
func (p *podLevelPlan) cappedMessage(pod *corev1.Pod) string {
	return fmt.Sprintf("container values kept within the pod-level resources (%s), which cannot change in place (%s); the recommendation asks for %s",
		resources.Resources{resources.PodLevel: cpuMemory(*pod.Spec.Resources)}.String(), p.why, p.uncapped.String())
}

// fitHeld returns target with its pod-level values worked out again once
// the containers' memory limits that cannot be lowered are kept (held), and
// with a pod-level memory limit that cannot be lowered safely kept too,
// added to held: one lowered to or below the pod's memory in use plus the
// margin (all of its containers' usage known), or to or below a value the
// memory record holds for the pod level (the kubelet refused it).
func (p *podLevelPlan) fitHeld(in Input, target resources.Resources, held []HeldLimit, memRecord *records.Record) (resources.Resources, []HeldLimit) {
	if !p.set || !p.movable {
		return target, held
	}
	pod := in.Pod
	out := withPodLevel(pod, target)
	lvl, ok := out[resources.PodLevel]
	if !ok {
		return out, held
	}
	want, ok := lvl.Limits[corev1.ResourceMemory]
	if !ok {
		return out, held
	}
	running, has := runningPodMemoryLimit(pod)
	if !has || want.Cmp(running) >= 0 {
		return out, held
	}
	h := HeldLimit{Container: resources.PodLevel, Wanted: want.DeepCopy()}
	if u, ok := podMemoryUsage(pod, in.MemoryUsage); ok {
		if floor := usageFloor(u, in.MemoryLimitMargin); want.Cmp(floor) <= 0 {
			h.Usage, h.Floor, h.Margin = ptrTo(u), &floor, in.MemoryLimitMargin
		}
	}
	if r, ok := memRecord.ContainerMemoryLimit(resources.PodLevel); ok && want.Cmp(r) <= 0 {
		h.Refused = ptrTo(r.DeepCopy())
	}
	if h.Floor == nil && h.Refused == nil {
		return out, held
	}
	kept := *lvl.DeepCopy()
	kept.Limits[corev1.ResourceMemory] = running.DeepCopy()
	if recommendation.LevelQOS(pod.Spec.Resources) == corev1.PodQOSGuaranteed {
		kept.Requests[corev1.ResourceMemory] = running.DeepCopy()
	}
	out[resources.PodLevel] = kept
	h.Running = ptrTo(running.DeepCopy())
	return out, append(held, h)
}

// runningPodMemoryLimit is the pod-level memory limit the pod runs with: the
// one the kubelet reports (status.resources), or, without a report, the
// spec's. A resize the kubelet refused is in the spec, not in the report.
func runningPodMemoryLimit(pod *corev1.Pod) (resource.Quantity, bool) {
	if pod.Status.Resources != nil {
		if q, ok := pod.Status.Resources.Limits[corev1.ResourceMemory]; ok {
			return q, true
		}
	}
	if pod.Spec.Resources == nil {
		return resource.Quantity{}, false
	}
	q, ok := pod.Spec.Resources.Limits[corev1.ResourceMemory]
	return q, ok
}

// podMemoryUsage is the memory the pod's containers and sidecars use,
// summed, when every one of them reports its usage.
func podMemoryUsage(pod *corev1.Pod, usage map[string]resource.Quantity) (resource.Quantity, bool) {
	var sum resource.Quantity
	n := 0
	for _, c := range sidecarsAndContainers(pod) {
		u, ok := usage[c.Name]
		if !ok {
			return resource.Quantity{}, false
		}
		sum.Add(u)
		n++
	}
	return sum, n > 0
}
