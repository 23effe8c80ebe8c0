// Package boost holds the pure arithmetic of the CPU startup boost of
// InPlace VPAs (the API's spec.startupBoost.cpu and
// containerPolicies[].startupBoost.cpu): the boosted CPU a container gets at
// creation, the pod annotation that remembers what it had without the boost,
// and when the boost ends. The admission controller applies the boost; the
// updater ends it in place. It has no client, no clock and no logger.
//
// The annotation is upstream VPA's (vpaCpuStartupBoost/<container>, the
// container's resources as created, in upstream's OriginalResources JSON),
// so that either project's updater can end a boost the other's admission
// controller started.
package boost

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/annotations"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"
)

// AnnotationPrefix starts the key of the pod annotation of each boosted
// container (upstream's).
const AnnotationPrefix = annotations.StartupCPUBoostAnnotationPrefix

// AnnotationKey is the key of the pod annotation of a boosted container.
func AnnotationKey(container string) string {
	return annotations.GetStartupCPUBoostAnnotationKey(container)
}

const (
	// MaxFactor bounds a Factor boost: a JVM wants a few times its steady
	// CPU at start, not thousands.
	MaxFactor = 100
	// maxCPUMilli bounds the boosted CPU (a million cores): beyond it the
	// policy is refused rather than overflow.
	maxCPUMilli = int64(1e9)
)

// For returns the startup boost that applies to container: its container
// policy's, else the VPA's; nil when there is none or the container's
// scaling mode is Off.
func For(vpa *vpatypes.VerticalPodAutoscaler, container string) *vpatypes.StartupBoost {
	policy := vpaapiutil.GetContainerResourcePolicy(container, vpa.Spec.ResourcePolicy)
	if policy != nil && policy.Mode != nil && *policy.Mode == vpatypes.ContainerScalingModeOff {
		return nil
	}
	boost := vpa.Spec.StartupBoost
	if policy != nil && policy.StartupBoost != nil {
		boost = policy.StartupBoost
	}
	if boost == nil || boost.CPU == nil {
		return nil
	}
	return boost
}

// Duration is how long container's boost lasts once the pod is Ready: its
// container policy's durationSeconds, else the VPA's, else 0 (the boost
// ends as soon as the pod is Ready). The same rule as upstream's updater.
func Duration(vpa *vpatypes.VerticalPodAutoscaler, container string) time.Duration {
	var seconds int32
	if b := vpa.Spec.StartupBoost; b != nil && b.CPU != nil && b.CPU.DurationSeconds != nil {
		seconds = *b.CPU.DurationSeconds
	}
	if p := vpaapiutil.GetContainerResourcePolicy(container, vpa.Spec.ResourcePolicy); p != nil &&
		p.StartupBoost != nil && p.StartupBoost.CPU != nil && p.StartupBoost.CPU.DurationSeconds != nil {
		seconds = *p.StartupBoost.CPU.DurationSeconds
	}
	return time.Duration(max(seconds, 0)) * time.Second
}

// Input is what the boost of one container at its pod's creation depends
// on.
type Input struct {
	VPA *vpatypes.VerticalPodAutoscaler
	// Container is the container as created, before any change.
	Container *corev1.Container
	// Requests and Limits are what the admission controller gives the
	// container without a boost: the recommendation, processed; nil when
	// there is none (the container's own values are boosted then).
	Requests, Limits corev1.ResourceList
	// Room is what the namespace's admission leaves to the boost (the
	// boosts of the pod's other containers taken); nil bounds nothing.
	Room *Room
}

// Outcome is the boost of one container.
type Outcome struct {
	// Boosted tells whether the container is boosted; then Requests and
	// Limits replace its cpu and memory, and the pod gets the annotation
	// AnnotationKey(container) = Annotation.
	Boosted          bool
	Requests, Limits corev1.ResourceList
	Annotation       string
	// Capped says why the boost is less than its policy asks, Wanted:
	// what the namespace's admission allows is less (Input.Room).
	Capped string
	Wanted resource.Quantity
	// NotBoosted says why a container with a boost policy is not boosted.
	NotBoosted string

	// How much the boost raises the container's CPU request and limit, in
	// millicores (Room.Take).
	requestGrowth, limitGrowth int64
}

// Apply computes the boost of one container. A container with no boost
// policy gets the zero Outcome. The boost is the largest CPU, up to what
// the policy asks, with which in.Room still admits the pod.
func Apply(in Input) Outcome {
	policy := For(in.VPA, in.Container.Name)
	if policy == nil {
		return Outcome{}
	}
	c := in.Container
	for _, p := range c.ResizePolicy {
		if p.ResourceName == corev1.ResourceCPU && p.RestartPolicy == corev1.RestartContainer {
			return Outcome{NotBoosted: "its CPU resize policy is RestartContainer: ending the boost would restart it"}
		}
	}
	// Without a recommendation, or for limits the VPA does not control, the
	// container's own values are what it runs with.
	requests, limits := in.Requests, in.Limits
	if len(requests) == 0 {
		requests = c.Resources.Requests
	}
	if len(limits) == 0 {
		limits = c.Resources.Limits
	}
	if l, ok := limits[corev1.ResourceCPU]; ok && l.IsZero() {
		// No limit to the kubelet, but the API server refuses a request
		// above it: the request can only grow with a limit imposed.
		return Outcome{NotBoosted: "its CPU limit of 0 (no limit) holds its CPU request at 0"}
	}
	base, ok := requests[corev1.ResourceCPU]
	if !ok {
		// Without a CPU request the API server defaults it to the limit.
		if base, ok = limits[corev1.ResourceCPU]; !ok || base.IsZero() {
			return Outcome{NotBoosted: "it has no CPU request to boost"}
		}
	}
	boosted, err := boostedCPU(base, policy.CPU)
	if err != nil {
		return Outcome{NotBoosted: err.Error()}
	}
	if p := vpaapiutil.GetContainerResourcePolicy(c.Name, in.VPA.Spec.ResourcePolicy); p != nil {
		if top, ok := p.MaxAllowed[corev1.ResourceCPU]; ok && boosted.Cmp(top) > 0 {
			boosted = top.DeepCopy()
		}
	}
	if boosted.Cmp(base) <= 0 {
		return Outcome{NotBoosted: fmt.Sprintf("its CPU request %s is already at the boost's cap", base.String())}
	}

	out := Outcome{Boosted: true, Requests: cpuMemory(requests), Limits: cpuMemory(limits)}
	limit, hasLimit := limits[corev1.ResourceCPU]
	requestsOnly := vpaapiutil.GetContainerControlledValues(c.Name, in.VPA.Spec.ResourcePolicy) == vpatypes.ContainerControlledValuesRequestsOnly
	if requestsOnly && hasLimit && boosted.Cmp(limit) >= 0 {
		// Limits are the container's own: the request stays under the
		// limit, and 1m under it unless it was equal, so that the QoS class
		// (which a resize cannot change) is the same boosted and not.
		boosted = limit.DeepCopy()
		if base.Cmp(limit) < 0 {
			boosted.Sub(resource.MustParse("1m"))
		}
	}
	if boosted.Cmp(base) <= 0 {
		return Outcome{NotBoosted: fmt.Sprintf("its CPU limit %s leaves no room for a boost", limit.String())}
	}
	baseMilli, limitMilli := base.MilliValue(), limit.MilliValue()
	// limitOf is the container's CPU limit with request b (millicores).
	limitOf := func(b int64) int64 {
		if !hasLimit || requestsOnly {
			return limitMilli
		}
		// Limits keep their ratio to requests: a Guaranteed pod stays
		// Guaranteed, a Burstable one keeps its headroom, as far as the
		// namespace's maxLimitRequestRatio allows.
		scaled := scale(limit, *resource.NewMilliQuantity(b, resource.DecimalSI), base)
		lim := max(scaled.MilliValue(), b)
		if in.Room == nil {
			return lim
		}
		if capped, ok := in.Room.limitCap(b, baseMilli, limitMilli); ok && capped < lim {
			lim = max(capped, b)
		}
		return lim
	}
	want := boosted.MilliValue()
	b := want
	if in.Room != nil {
		if ok, _ := in.Room.check(want, limitOf(want), hasLimit, baseMilli, limitMilli); !ok {
			// Every constraint grows with the request: the largest request
			// admitted is found by bisection between base (admitted as
			// created) and want.
			lo, hi := baseMilli, want
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				if ok, _ := in.Room.check(mid, limitOf(mid), hasLimit, baseMilli, limitMilli); ok {
					lo = mid
				} else {
					hi = mid
				}
			}
			_, by := in.Room.check(hi, limitOf(hi), hasLimit, baseMilli, limitMilli)
			if lo == baseMilli {
				return Outcome{NotBoosted: by + ": no room for a boost"}
			}
			b, out.Capped, out.Wanted = lo, by, boosted.DeepCopy()
		}
	}
	out.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(b, resource.DecimalSI)
	if hasLimit && !requestsOnly {
		out.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(limitOf(b), resource.DecimalSI)
	}
	out.requestGrowth = b - baseMilli
	if hasLimit {
		out.limitGrowth = limitOf(b) - limitMilli
	}
	value, err := annotations.GetOriginalResourcesAnnotationValue(c)
	if err != nil {
		return Outcome{NotBoosted: "its resources cannot be recorded: " + err.Error()}
	}
	out.Annotation = value
	return out
}

// boostedCPU is base boosted by policy, refused when the policy is not one
// the API allows or the result is beyond any node.
func boostedCPU(base resource.Quantity, policy *vpatypes.GenericStartupBoost) (resource.Quantity, error) {
	milli := base.MilliValue()
	switch policy.Type {
	case vpatypes.FactorStartupBoostType, "":
		if policy.Factor == nil || *policy.Factor < 1 || *policy.Factor > MaxFactor {
			return resource.Quantity{}, fmt.Errorf("its boost factor must be between 1 and %d", MaxFactor)
		}
		if milli > maxCPUMilli/int64(*policy.Factor) {
			return resource.Quantity{}, fmt.Errorf("its boosted CPU would exceed %d cores", maxCPUMilli/1000)
		}
		milli *= int64(*policy.Factor)
	case vpatypes.QuantityStartupBoostType:
		if policy.Quantity == nil || policy.Quantity.Sign() < 0 || policy.Quantity.Cmp(*resource.NewMilliQuantity(maxCPUMilli, resource.DecimalSI)) > 0 {
			return resource.Quantity{}, fmt.Errorf("its boost quantity must be between 0 and %d cores", maxCPUMilli/1000)
		}
		milli += policy.Quantity.MilliValue()
		if milli > maxCPUMilli {
			return resource.Quantity{}, fmt.Errorf("its boosted CPU would exceed %d cores", maxCPUMilli/1000)
		}
	default:
		return resource.Quantity{}, fmt.Errorf("its boost type %q is not Factor or Quantity", policy.Type)
	}
	return *resource.NewMilliQuantity(milli, resource.DecimalSI), nil
}

// scale returns q × num / den, rounded up to the millicore.
func scale(q, num, den resource.Quantity) resource.Quantity {
	d := den.MilliValue()
	if d <= 0 {
		return q.DeepCopy()
	}
	v := math.Ceil(float64(q.MilliValue()) * float64(num.MilliValue()) / float64(d))
	if v > float64(maxCPUMilli) {
		v = float64(maxCPUMilli)
	}
	return *resource.NewMilliQuantity(int64(v), resource.DecimalSI)
}

// cpuMemory copies the cpu and memory of list.
func cpuMemory(list corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := list[name]; ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}
