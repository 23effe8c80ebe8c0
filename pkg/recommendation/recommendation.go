// Package recommendation turns a VPA's recommendation into the requests and
// limits each container of a pod should have, app containers and native
// sidecars alike (sidecar.go). It is shared by the updater and
// the admission controller so that a pod gets the same values whether it is
// mutated at creation or resized in place.
//
// All of the processing is upstream VPA's own: capping to the VPA's
// minAllowed/maxAllowed and to the LimitRange, controlledValues, and limits
// scaled in proportion to requests.
package recommendation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	admissionrecommendation "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/pod/recommendation"
	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"
)

// Container holds what one container should have.
type Container struct {
	// Requests and Limits are what the container should be given, after all
	// processing. Limits is empty when the VPA does not control limits and
	// the container keeps its own.
	Requests corev1.ResourceList
	Limits   corev1.ResourceList
	// LowerBound and UpperBound are the capped bounds of the recommendation,
	// used to tell whether current requests are outside the recommended range.
	LowerBound corev1.ResourceList
	UpperBound corev1.ResourceList
}

// Desired maps container name to what that container should have: app
// containers and sidecars (Containers). Containers without a
// recommendation are absent, and so are init containers that are not
// sidecars.
type Desired map[string]Container

// Calculator computes Desired for a pod and its VPA.
type Calculator struct {
	limitRanges limitrange.LimitRangeCalculator
	processor   vpaapiutil.RecommendationProcessor
	// ranges lists the namespaces' LimitRanges, which what ForPod returns
	// is kept within (fit); nil: upstream's capping only.
	ranges corelisters.LimitRangeLister
	// serverMinor is the API server's minor version (0: unknown), whose
	// LimitRanger checks a resize whole or only what it changes (fit).
	serverMinor int
}

// WithServerMinor tells c the API server's minor version (0: unknown), so
// that what ForPod returns for a pod that exists (it has a UID: it is
// resized) follows that version's LimitRanger (fit). A pod without a UID
// (one being created, a Job's template) is kept within the LimitRanges
// whole, as on every version. It returns c.
func (c *Calculator) WithServerMinor(minor int) *Calculator {
	c.serverMinor = minor
	return c
}

// WithLimitRanges makes c keep what it returns within the LimitRanges
// lister lists, as the API server's admission checks them (fit), beyond
// what upstream's capping does. It returns c.
func (c *Calculator) WithLimitRanges(lister corelisters.LimitRangeLister) *Calculator {
	c.ranges = lister
	return c
}

// NewCalculator returns a Calculator that caps recommendations with the
// given LimitRange source. Use limitrange.NewNoopLimitsCalculator() when
// LimitRanges are not to be considered.
func NewCalculator(limitRanges limitrange.LimitRangeCalculator) *Calculator {
	return &Calculator{
		limitRanges: limitRanges,
		processor:   vpaapiutil.NewCappingRecommendationProcessor(limitRanges),
	}
}

// ForPod returns the resources each container of pod should have according to
// vpa. It returns an empty Desired, and no error, when the VPA has no
// recommendation yet.
// Forget implements the updater's Calculator: a Calculator remembers
// nothing per VPA.
func (c *Calculator) Forget(types.UID) {}

func (c *Calculator) ForPod(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (Desired, error) {
	if pod == nil || vpa == nil {
		return nil, fmt.Errorf("pod and vpa are required")
	}
	if vpa.Status.Recommendation == nil || len(vpa.Status.Recommendation.ContainerRecommendations) == 0 {
		return Desired{}, nil
	}
	// Upstream's processing finds sidecars only among the containers, and
	// takes a limit of 0 the kubelet reports for one the container lacks
	// for a limit (zerolimits.go).
	view := withoutReportedZeroLimits(withSidecars(pod))
	processed, annotations, err := c.processor.Apply(vpa, view)
	if err != nil {
		return nil, fmt.Errorf("capping recommendation: %w", err)
	}
	if annotations == nil {
		annotations = vpaapiutil.ContainerToAnnotationsMap{}
	}
	limitRange, err := c.limitRanges.GetContainerLimitRangeItem(pod.Namespace)
	if err != nil {
		return nil, fmt.Errorf("reading container LimitRange of namespace %q: %w", pod.Namespace, err)
	}
	resources := admissionrecommendation.GetContainersResources(view, vpa.Spec.ResourcePolicy, *processed, limitRange, false, annotations)

	desired := make(Desired, len(view.Spec.Containers))
	for i, container := range view.Spec.Containers {
		rec := vpaapiutil.GetRecommendationForContainer(container.Name, processed)
		if rec == nil || i >= len(resources) {
			continue
		}
		r := resources[i]
		r.RemoveEmptyResourceKeyIfAny()
		if len(r.Requests) == 0 && len(r.Limits) == 0 {
			continue
		}
		desired[container.Name] = Container{
			Requests:   onlyCPUAndMemory(r.Requests),
			Limits:     onlyCPUAndMemory(r.Limits),
			LowerBound: onlyCPUAndMemory(rec.LowerBound),
			UpperBound: onlyCPUAndMemory(rec.UpperBound),
		}
	}
	desired = withoutZeroLimitResources(view, desired)
	if c.ranges != nil {
		ranges, err := c.ranges.LimitRanges(pod.Namespace).List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("reading the LimitRanges of namespace %q: %w", pod.Namespace, err)
		}
		desired = fit(pod, desired, ranges, pod.UID != "" && ChecksOnlyChanges(c.serverMinor))
	}
	return SharedAtPodLevel(pod, desired), nil
}

// onlyCPUAndMemory keeps the two resources that can be changed in place and
// that a VPA recommends. in is computed afresh for each call of ForPod, so
// it is returned as it is when it holds nothing else.
func onlyCPUAndMemory(in corev1.ResourceList) corev1.ResourceList {
	if len(in) == 0 {
		return nil
	}
	others := false
	for name := range in {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			others = true
			break
		}
	}
	if !others {
		return in
	}
	out := corev1.ResourceList{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := in[name]; ok {
			out[name] = q.DeepCopy()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
