package boost

import (
	"fmt"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Admission is what the API server's admission checks of a new pod's CPU
// in its namespace, the checks a boost could fail: the LimitRanger plugin's
// max and maxLimitRequestRatio, per container and per pod, and the
// ResourceQuota plugin's cpu, requests.cpu and limits.cpu. A boost only
// raises CPU, so the minimums a pod meets without it it meets boosted. The
// zero Admission bounds nothing.
type Admission struct {
	// ContainerMax and PodMax are the lowest cpu max of the namespace's
	// LimitRange items of type Container and Pod; nil when none has one.
	ContainerMax, PodMax *resource.Quantity
	// ContainerRatio and PodRatio are their lowest cpu
	// maxLimitRequestRatio; nil when none has one.
	ContainerRatio, PodRatio *resource.Quantity
	// Quotas are the namespace's ResourceQuotas (see quotaApplies).
	Quotas []*corev1.ResourceQuota
}

// Room is a new pod against its namespace's Admission while its containers
// are boosted one by one: Apply keeps each boost within what is left, and
// Take counts it. The pod is the one created without the boost (the
// recommendation applied). It is not safe for concurrent use; each review
// makes its own.
type Room struct {
	adm Admission
	// The pod's CPU requests and limits in millicores, as LimitRanger counts
	// them: sum* over containers and sidecars (the part a boost of a
	// container raises), total* the pod's (the larger of that sum and of
	// what an init container needs). Boosts taken so far are in sum*.
	sumR, sumL, totalR, totalL int64
	// Pod overhead: ResourceQuota counts it, LimitRanger does not. (The
	// admission controller does not read it of a new pod: 0 there.)
	overheadR, overheadL int64
	hasLimits            bool
	quotas               []quotaRoom
}

// quotaRoom is one hard cpu bound of a ResourceQuota that counts the pod:
// on its requests (cpu, requests.cpu) or on its limits (limits.cpu).
type quotaRoom struct {
	name       string
	key        corev1.ResourceName
	limits     bool
	hard, used resource.Quantity
}

// NewRoom returns the room adm leaves to the boosts of pod, the pod as
// created without them.
func NewRoom(adm Admission, pod *corev1.Pod) *Room {
	r := &Room{adm: adm}
	add := func(c *corev1.Container) {
		req, hasReq := c.Resources.Requests[corev1.ResourceCPU]
		lim, hasLim := c.Resources.Limits[corev1.ResourceCPU]
		if !hasReq && hasLim {
			// The API server defaults a missing request to the limit.
			req = lim
		}
		r.sumR += req.MilliValue()
		r.sumL += lim.MilliValue()
		r.hasLimits = r.hasLimits || hasLim
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true, SkipPodLevelResources: true}
	r.totalR = max(r.sumR, milli(resourcehelper.PodRequests(pod, opts)))
	r.totalL = max(r.sumL, milli(resourcehelper.PodLimits(pod, opts)))
	r.overheadR = pod.Spec.Overhead.Cpu().MilliValue()
	r.overheadL = r.overheadR
	for _, q := range adm.Quotas {
		if !quotaApplies(q, pod) {
			continue
		}
		for _, key := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU} {
			// status.hard is what the quota admission enforces.
			if hard, ok := q.Status.Hard[key]; ok {
				r.quotas = append(r.quotas, quotaRoom{name: q.Name, key: key, limits: key == corev1.ResourceLimitsCPU,
					hard: hard, used: q.Status.Used[key]})
			}
		}
	}
	return r
}

func milli(list corev1.ResourceList) int64 { return list.Cpu().MilliValue() }

// Take counts a boost Apply returned against the room left.
func (r *Room) Take(o Outcome) {
	if r == nil || !o.Boosted {
		return
	}
	r.sumR += o.requestGrowth
	r.sumL += o.limitGrowth
	r.totalR = max(r.totalR, r.sumR)
	r.totalL = max(r.totalL, r.sumL)
}

// limitCap returns the largest limit of a container whose request would be
// b (millicores), given its request and limit without the boost, that the
// ratios allow; ok false when there is no ratio to keep.
func (r *Room) limitCap(b, base, baseLimit int64) (capped int64, ok bool) {
	capped = -1
	if q := r.adm.ContainerRatio; q != nil {
		capped = mulDiv(q.MilliValue(), b, 1000)
	}
	if q := r.adm.PodRatio; q != nil {
		// The pod's limits over its requests, with the container's share
		// of the sum grown: (sumL + lim - baseLimit) ≤ ratio × podR.
		podR := max(r.sumR+b-base, r.totalR)
		if c := mulDiv(q.MilliValue(), podR, 1000) - r.sumL + baseLimit; capped < 0 || c < capped {
			capped = c
		}
	}
	return capped, capped >= 0
}

// check tells whether a container boosted from base to request b, with
// limit lim (millicores; hasLimit false when it has none), keeps the pod
// admitted; when not, what refuses it.
func (r *Room) check(b, lim int64, hasLimit bool, base, baseLimit int64) (ok bool, by string) {
	if q := r.adm.ContainerMax; q != nil {
		if b > q.MilliValue() || (hasLimit && lim > q.MilliValue()) {
			return false, "the LimitRange max cpu per Container is " + q.String()
		}
	}
	if q := r.adm.ContainerRatio; q != nil && hasLimit && !ratioWithin(lim, b, q.MilliValue()) {
		return false, "the LimitRange maxLimitRequestRatio of cpu per Container is " + q.String()
	}
	dR, dL := b-base, int64(0)
	if hasLimit {
		dL = lim - baseLimit
	}
	podR, podL := max(r.sumR+dR, r.totalR), max(r.sumL+dL, r.totalL)
	if q := r.adm.PodMax; q != nil {
		if podR > q.MilliValue() || (r.hasLimits && podL > q.MilliValue()) {
			return false, "the LimitRange max cpu per Pod is " + q.String()
		}
	}
	if q := r.adm.PodRatio; q != nil && r.hasLimits && !ratioWithin(podL, podR, q.MilliValue()) {
		return false, "the LimitRange maxLimitRequestRatio of cpu per Pod is " + q.String()
	}
	for _, q := range r.quotas {
		usage := podR + r.overheadR
		if q.limits {
			if !r.hasLimits {
				continue
			}
			usage = podL + r.overheadL
		}
		if q.used.MilliValue()+usage > q.hard.MilliValue() {
			return false, fmt.Sprintf("the ResourceQuota %s %s is %s, %s used", q.name, q.key, q.hard.String(), q.used.String())
		}
	}
	return true, ""
}

// ratioWithin tells whether lim/req ≤ ratio (millis), exactly as
// LimitRanger compares them: lim × 1000 ≤ ratio × req.
func ratioWithin(lim, req, ratioMilli int64) bool {
	if req <= 0 {
		return false
	}
	left := new(big.Int).Mul(big.NewInt(lim), big.NewInt(1000))
	right := new(big.Int).Mul(big.NewInt(ratioMilli), big.NewInt(req))
	return left.Cmp(right) <= 0
}

// mulDiv returns a × b / c rounded down, without overflow; c > 0.
func mulDiv(a, b, c int64) int64 {
	v := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	v.Quo(v, big.NewInt(c))
	if !v.IsInt64() {
		return maxCPUMilli
	}
	return v.Int64()
}

// quotaApplies tells whether a ResourceQuota may count pod. A boosted pod
// has a CPU request, so a quota of scope BestEffort never does. The other
// scopes depend on fields the admission controller does not read of a new
// pod (activeDeadlineSeconds, priorityClassName, affinity): such a quota
// counts the pod in. A quota wrongly counted only lowers a boost.
func quotaApplies(q *corev1.ResourceQuota, _ *corev1.Pod) bool {
	for _, s := range q.Spec.Scopes {
		if s == corev1.ResourceQuotaScopeBestEffort {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, e := range q.Spec.ScopeSelector.MatchExpressions {
			if e.ScopeName == corev1.ResourceQuotaScopeBestEffort && e.Operator == corev1.ScopeSelectorOpExists {
				return false
			}
		}
	}
	return true
}
