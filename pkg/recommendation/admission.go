package recommendation

import (
	"maps"
	"math/big"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// The LimitRanger admission plugin checks every new pod, and since
// Kubernetes 1.33 every resize, against the namespace's LimitRanges: per
// container and per pod, cpu and memory requests and limits within min and
// max, and limits over requests within maxLimitRequestRatio. Upstream's
// capping (above) keeps a recommendation within min and max for most pods,
// but not all of them: it does not know maxLimitRequestRatio, so a
// container whose VPA controls only its requests can be given a request so
// far under its own limit that the ratio is exceeded; and its capping to a
// pod's max misses pods that mix containers with and without limits, and
// rounds memory past the max. A pod so patched is refused at creation (its
// workload then creates none) and a resize to it is refused.
//
// fit closes those gaps: it keeps what each container is given within the
// LimitRanges, and where a pod's max cannot be met by lowering what the VPA
// controls (or a pod's min or ratio is not met) it gives up that resource
// for the pod: its containers keep theirs, which were admitted.
//
// From Kubernetes 1.38 LimitRanger checks only what a resize changes: a
// container's resource whose request and limit stay as they are, and a
// resource of the pod whose total request and limit stay as they are, are
// not checked, so a pod admitted before its LimitRange was tightened is
// resized without being brought within it. Up to 1.37 a resize is checked
// as a new pod is, every value of every container. So for a resize on 1.38
// (onlyChanges) fit leaves a container's resource the VPA would not change
// as it is, instead of moving it into the bounds, and does not lower the
// others to meet the pod's bounds when the pod's total stays as it is. A
// new pod (admission) or a Job's template is checked whole on every
// version.

// fitResources are the resources fit keeps within the LimitRanges.
var fitResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// rangeBounds are the combined bounds of one resource for one LimitRange
// type: the highest min, the lowest max and maxLimitRequestRatio (in
// millis); nil when none.
type rangeBounds struct {
	min, max *resource.Quantity
	ratio    *resource.Quantity
}

func combine(ranges []*corev1.LimitRange, t corev1.LimitType, r corev1.ResourceName) rangeBounds {
	var b rangeBounds
	for _, lr := range ranges {
		for _, item := range lr.Spec.Limits {
			if item.Type != t {
				continue
			}
			if q, ok := item.Min[r]; ok && (b.min == nil || q.Cmp(*b.min) > 0) {
				b.min = &q
			}
			if q, ok := item.Max[r]; ok && (b.max == nil || q.Cmp(*b.max) < 0) {
				b.max = &q
			}
			if q, ok := item.MaxLimitRequestRatio[r]; ok && (b.ratio == nil || q.Cmp(*b.ratio) < 0) {
				b.ratio = &q
			}
		}
	}
	return b
}

// amount is q in the unit LimitRanger compares r in: millicores, bytes.
func amount(r corev1.ResourceName, q resource.Quantity) int64 {
	if r == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func quantityOf(r corev1.ResourceName, v int64) resource.Quantity {
	if r == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.BinarySI)
}

// mulDiv returns a × b / c, rounded down, or up when up; c > 0.
func mulDiv(a, b, c int64, up bool) int64 {
	v := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	q, m := new(big.Int).QuoRem(v, big.NewInt(c), new(big.Int))
	if up && m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 1 << 62
	}
	return q.Int64()
}

// ratioMet tells whether lim/req ≤ ratio as LimitRanger compares them.
func ratioMet(lim, req int64, ratio *resource.Quantity) bool {
	if req <= 0 {
		return false
	}
	l := new(big.Int).Mul(big.NewInt(lim), big.NewInt(1000))
	return l.Cmp(new(big.Int).Mul(big.NewInt(ratio.MilliValue()), big.NewInt(req))) <= 0
}

// fitContainer is one container's resource r under fit, in LimitRanger's
// unit: its desired request, and its limit, desired (ours) or its own.
type fitContainer struct {
	name         string
	req, lim     int64
	hasLim, ours bool
	// floor is the lowest request its container bounds allow; top the
	// request and limit once within them.
	floor          int64
	topReq, topLim int64
}

// ChecksOnlyChanges tells whether the LimitRanger admission plugin of an
// API server of minor version serverMinor checks only the values a resize
// changes (1.38+, see fit); 0, unknown, is taken for an older one.
func ChecksOnlyChanges(serverMinor int) bool { return serverMinor >= 38 }

// fit returns desired kept within ranges for pod (see above); onlyChanges:
// pod exists and is resized, on an API server whose LimitRanger checks only
// what a resize changes. desired is not changed.
func fit(pod *corev1.Pod, desired Desired, ranges []*corev1.LimitRange, onlyChanges bool) Desired {
	if len(ranges) == 0 || len(desired) == 0 {
		return desired
	}
	out := make(Desired, len(desired))
	for name, c := range desired {
		out[name] = Container{Requests: maps.Clone(c.Requests), Limits: maps.Clone(c.Limits),
			LowerBound: c.LowerBound, UpperBound: c.UpperBound}
	}
	// What LimitRanger checks: the pod with its defaults set (a resize of
	// a pod admitted before them adds them). A container's own values are
	// read from it, and compared with the stored pod's for 1.38's rule.
	view := limitRangerView(pod, ranges)
	for _, r := range fitResources {
		cb := combine(ranges, corev1.LimitTypeContainer, r)
		var fcs []*fitContainer
		for ref := range Containers(view) {
			c := ref.Container
			want, ok := out[c.Name]
			if !ok {
				continue
			}
			q, ok := want.Requests[r]
			if !ok {
				continue
			}
			if onlyChanges && unchanged(stored(pod, ref), c, want, r) {
				// Not checked: it keeps its values, counted in the pod's
				// as the containers the VPA does not control are.
				continue
			}
			fc := &fitContainer{name: c.Name, req: amount(r, q)}
			if l, ok := want.Limits[r]; ok {
				fc.lim, fc.hasLim, fc.ours = amount(r, l), true, true
			} else if l, ok := c.Resources.Limits[r]; ok {
				fc.lim, fc.hasLim = amount(r, l), true
			}
			if cb.ratio != nil && !fc.ours && (!fc.hasLim || fc.lim == 0) {
				// LimitRanger holds a container to a ratio only with a
				// limit that is not 0: a value of it that changes is
				// refused, whatever it is. It keeps its own (a pod
				// admitted before its LimitRange; from 1.38 the rest of
				// the resize passes).
				delete(want.Requests, r)
				if len(want.Requests) == 0 && len(want.Limits) == 0 {
					delete(out, c.Name)
				}
				continue
			}
			fitContainerBounds(r, fc, cb)
			fcs = append(fcs, fc)
		}
		if len(fcs) == 0 {
			continue
		}
		if !fitPod(view, pod, r, fcs, cb, combine(ranges, corev1.LimitTypePod, r), onlyChanges) {
			// The pod's bounds cannot be met by what the VPA controls: its
			// containers keep their r, which were admitted.
			for name, c := range out {
				delete(c.Requests, r)
				delete(c.Limits, r)
				if len(c.Requests) == 0 && len(c.Limits) == 0 {
					delete(out, name)
				}
			}
			continue
		}
		for _, fc := range fcs {
			c := out[fc.name]
			c.Requests[r] = quantityOf(r, fc.req)
			if fc.ours {
				c.Limits[r] = quantityOf(r, fc.lim)
			}
		}
	}
	return out
}

// unchanged tells whether the resize of want leaves old's request and
// limit of r as they are: want's request is old's, and the limit, want's or
// now's (the container as LimitRanger checks it: its own, or the default
// the resize adds), is old's or absent from both.
func unchanged(old, now *corev1.Container, want Container, r corev1.ResourceName) bool {
	q, ok := want.Requests[r]
	if cur, has := old.Resources.Requests[r]; !ok || !has || q.Cmp(cur) != 0 {
		return false
	}
	l, has := want.Limits[r]
	if !has {
		l, has = now.Resources.Limits[r]
	}
	cur, had := old.Resources.Limits[r]
	return has == had && (!has || l.Cmp(cur) == 0)
}

// stored returns the container of pod that ref (a container of a copy of
// pod) stands for.
func stored(pod *corev1.Pod, ref Ref) *corev1.Container {
	if ref.Sidecar {
		return &pod.Spec.InitContainers[ref.Index]
	}
	return &pod.Spec.Containers[ref.Index]
}

// fitContainerBounds keeps fc within its container's min, max and ratio,
// and records the lowest request they allow.
func fitContainerBounds(r corev1.ResourceName, fc *fitContainer, cb rangeBounds) {
	if cb.min != nil {
		fc.floor = amount(r, *cb.min)
	}
	if cb.ratio != nil && fc.hasLim && !fc.ours {
		// The limit is the container's own: the request may go no lower
		// than limit / ratio.
		fc.floor = max(fc.floor, mulDiv(fc.lim, 1000, cb.ratio.MilliValue(), true))
	}
	fc.req = max(fc.req, fc.floor)
	if fc.hasLim && !fc.ours {
		// No request above the limit the container keeps (one LimitRanger
		// adds as its default included): the API server refuses it.
		fc.req = min(fc.req, fc.lim)
	}
	if cb.max != nil {
		m := amount(r, *cb.max)
		fc.req = min(fc.req, m)
		if fc.ours {
			fc.lim = min(fc.lim, m)
		}
	}
	fc.lim = limitFor(fc, fc.req, fc.lim, cb)
	fc.topReq, fc.topLim = fc.req, fc.lim
}

// limitFor is the limit of fc with request req, for a limit of ours that
// would be lim: no lower than the request, no higher than the ratio allows.
// A limit of the container's own stays as it is.
func limitFor(fc *fitContainer, req, lim int64, cb rangeBounds) int64 {
	if !fc.ours {
		return fc.lim
	}
	lim = max(lim, req)
	if cb.ratio != nil {
		lim = max(min(lim, mulDiv(cb.ratio.MilliValue(), req, 1000, false)), req)
	}
	return lim
}

// fitPod keeps the pod within its own bounds pb (type Pod): when its max is
// exceeded, what the VPA controls is lowered, all containers by the same
// share, down to what their container bounds allow. It returns false when
// the pod's bounds cannot be met so. pod is as LimitRanger checks it
// (limitRangerView of storedPod). onlyChanges: a pod whose total request
// and limit of r stay those of storedPod is not checked.
func fitPod(pod, storedPod *corev1.Pod, r corev1.ResourceName, fcs []*fitContainer, cb, pb rangeBounds, onlyChanges bool) bool {
	if pb.min == nil && pb.max == nil && pb.ratio == nil {
		return true
	}
	// A copy of the pod's containers and init containers (a sidecar adds
	// to the pod's requests, the others count at their peak) whose r is set
	// by set(share).
	p := &corev1.Pod{Spec: pod.Spec}
	p.Spec.Containers = slices.Clone(pod.Spec.Containers)
	p.Spec.InitContainers = slices.Clone(pod.Spec.InitContainers)
	index := map[string]*corev1.Container{}
	for ref := range Containers(p) {
		c := ref.Container
		c.Resources.Requests = maps.Clone(c.Resources.Requests)
		c.Resources.Limits = maps.Clone(c.Resources.Limits)
		index[c.Name] = c
	}
	set := func(share int64) {
		for _, fc := range fcs {
			fc.req = max(fc.floor, mulDiv(fc.topReq, share, 1000, false))
			fc.lim = limitFor(fc, fc.req, mulDiv(fc.topLim, share, 1000, false), cb)
			c := index[fc.name]
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[r] = quantityOf(r, fc.req)
			if fc.ours {
				if c.Resources.Limits == nil {
					c.Resources.Limits = corev1.ResourceList{}
				}
				c.Resources.Limits[r] = quantityOf(r, fc.lim)
			}
		}
	}
	// within tells whether the pod meets pb (maxOnly: its max only), as
	// LimitRanger counts the pod's requests and limits.
	within := func(maxOnly bool) bool {
		opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
		reqs, lims := resourcehelper.PodRequests(p, opts), resourcehelper.PodLimits(p, opts)
		req, hasReq := reqs[r]
		lim, hasLim := lims[r]
		if pb.max != nil && (amount(r, req) > amount(r, *pb.max) || (hasLim && amount(r, lim) > amount(r, *pb.max))) {
			return false
		}
		if maxOnly {
			return true
		}
		if pb.min != nil && (!hasReq || amount(r, req) < amount(r, *pb.min) || (hasLim && amount(r, lim) < amount(r, *pb.min))) {
			return false
		}
		return pb.ratio == nil || (hasReq && hasLim && ratioMet(amount(r, lim), amount(r, req), pb.ratio))
	}
	set(1000)
	if within(false) {
		return true
	}
	if onlyChanges {
		opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
		if sameTotal(r, resourcehelper.PodRequests(p, opts), resourcehelper.PodRequests(storedPod, opts)) &&
			sameTotal(r, resourcehelper.PodLimits(p, opts), resourcehelper.PodLimits(storedPod, opts)) {
			return true
		}
	}
	if pb.max == nil {
		return false
	}
	// The largest share (in thousandths) within the pod's max: every
	// value grows with it.
	lo, hi := int64(-1), int64(1000)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		set(max(mid, 0))
		if within(true) {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo < 0 {
		return false
	}
	set(lo)
	return within(false)
}

// sameTotal tells whether r is in both lists with equal quantities, or in
// neither.
func sameTotal(r corev1.ResourceName, a, b corev1.ResourceList) bool {
	qa, inA := a[r]
	qb, inB := b[r]
	return inA == inB && (!inA || qa.Cmp(qb) == 0)
}
