package target

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"
)

// From a pod to its VPA: the three rules of the package comment, each
// looking only at the VPAs indexed under what the pod reaches (index.go).

// VPAForPod returns the VPA controlling pod, or nil when there is none. VPAs
// whose target cannot be resolved are passed over (and logged). An error
// means the pod's owners could not all be read: the answer may change once
// they can.
//
// Only the VPAs indexed under the pod's controller, or under an object the
// pod reaches through its owners, are looked at, never all VPAs of the
// namespace: a pod is decided in the same time whether its namespace holds
// one VPA or thousands.
func (r *Resolver) VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	if !r.hasVPAs(pod.Namespace) {
		// Nothing to find: not even the pod's controllers are looked up.
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	var best *vpatypes.VerticalPodAutoscaler

	// Rule 2: a custom resource without /scale that controls the pod.
	owner, custom := CustomOwnerOf(pod)
	if custom {
		vpas, err := r.byTargetRef(pod.Namespace, owner.Kind, owner.Name)
		if err != nil {
			return nil, err
		}
		for _, vpa := range vpas {
			t, err := r.Target(ctx, vpa)
			if RetryLater(ctx, err) {
				return nil, err
			}
			if err != nil {
				logger.V(4).Info("Cannot resolve VPA target", "vpa", klog.KObj(vpa), "err", err)
				continue
			}
			if t.Owner != nil && *t.Owner == owner && vpaapiutil.Stronger(vpa, best) {
				best = vpa
			}
		}
	}

	// Rule 3: a target with /scale reached through the pod's owners.
	reached, err := r.reachedTargets(ctx, pod)
	if err != nil {
		return nil, err
	}
	for _, vpa := range reached {
		if vpaapiutil.Stronger(vpa, best) {
			best = vpa
		}
	}

	if custom && r.ownerNotScalable(ctx, owner) {
		// Upstream's walk stops at such a controller (or fails on a kind
		// nobody serves) and finds no VPA: not walking also spares its
		// REST mapper a lookup, which would load discovery before the
		// CRDs created after it, and the budget a /scale read.
		return best, nil
	}

	// Rule 1, upstream's (vpaapiutil.GetControllingVPAForPod): the
	// strongest VPA whose targetRef names the pod's top-most well-known or
	// scalable controller and whose selector matches the pod's labels.
	parent, err := r.topMostController(ctx, pod)
	if RetryLater(ctx, err) {
		return nil, fmt.Errorf("finding the top-most controller of pod %s: %w", klog.KObj(pod), err)
	}
	if err != nil {
		// Upstream passes such a pod over too: a controller that is gone or
		// cannot be walked (a custom resource without /scale and no VPA).
		logger.V(4).Info("Cannot find the pod's top-most controller", "err", err)
		return best, nil
	}
	if parent == nil {
		return best, nil
	}
	vpas, err := r.byTargetRef(parent.Namespace, parent.Kind, parent.Name)
	if err != nil {
		return nil, err
	}
	for _, vpa := range vpas {
		t, ok, err := r.selectorTarget(ctx, vpa)
		if err != nil {
			return nil, err
		}
		if ok && matches(pod, vpa, t) && vpaapiutil.Stronger(vpa, best) {
			best = vpa
		}
	}
	return best, nil
}

// topMostController is upstream's walk from a pod to its top-most
// well-known or scalable controller. From a controller that is not
// well-known it reads /scale: then it takes a share of the pod's
// namespace's budget and is bounded in time.
func (r *Resolver) topMostController(ctx context.Context, pod *corev1.Pod) (*controllerfetcher.ControllerKeyWithAPIVersion, error) {
	if ref := metav1.GetControllerOf(pod); ref != nil && !wellKnownKinds[ref.Kind] {
		release, err := r.budget.Acquire(ctx, pod.Namespace)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	ctx, cancel := context.WithTimeout(ctx, upstreamReadTimeout)
	defer cancel()
	parent, err := vpaapiutil.FindParentControllerForPod(ctx, pod, r.controllers)
	if err != nil && ctx.Err() == nil {
		return r.pastLaggingCaches(ctx, pod, err)
	}
	return parent, err
}

// ownerWalkTimeout bounds one walk up a pod's owners, whatever the
// caller's context (the updater's workers have no deadline of their own).
const ownerWalkTimeout = 10 * time.Second

// reachedTargets returns the VPAs of rule 3 for pod: those whose target,
// a custom resource with a selector, the pod reaches through its owners and
// whose selector matches the pod. Only the targets whose selector matches
// the pod are looked for: nothing is walked when the Resolver reads no
// owners, or when no VPA of the namespace targets a custom resource with
// /scale whose selector matches the pod. The walk is bounded by
// ownerWalkTimeout.
func (r *Resolver) reachedTargets(ctx context.Context, pod *corev1.Pod) ([]*vpatypes.VerticalPodAutoscaler, error) {
	if r.owners == nil {
		return nil, nil
	}
	want := r.scalableCustomTargets(ctx, pod.Namespace)
	for key, vpas := range want {
		var matching []*vpatypes.VerticalPodAutoscaler
		for _, vpa := range vpas {
			t, ok, err := r.selectorTarget(ctx, vpa)
			if err != nil {
				return nil, err
			}
			if ok && matches(pod, vpa, t) {
				matching = append(matching, vpa)
			}
		}
		if len(matching) == 0 {
			delete(want, key)
			continue
		}
		want[key] = matching
	}
	if len(want) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ownerWalkTimeout)
	defer cancel()
	owners, err := reachableOwners(ctx, r.owners, pod, want)
	if err != nil {
		return nil, fmt.Errorf("walking the owners of pod %s: %w", klog.KObj(pod), err)
	}
	var out []*vpatypes.VerticalPodAutoscaler
	for _, o := range owners {
		out = append(out, want[o.Key()]...)
	}
	return out, nil
}

// scalableCustomTargets returns the VPAs of namespace whose targetRef names
// a custom resource that may have /scale, by the target's Owner.Key.
// Targets discovery serves without /scale are left out: rule 2 finds their
// pods, and reading further up for them would be wasted.
func (r *Resolver) scalableCustomTargets(ctx context.Context, namespace string) map[string][]*vpatypes.VerticalPodAutoscaler {
	objs, err := r.vpas.ByIndex(customTargetIndex, namespace)
	if err != nil || len(objs) == 0 {
		return nil
	}
	out := map[string][]*vpatypes.VerticalPodAutoscaler{}
	for _, obj := range objs {
		vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
		if !ok || vpa.Spec.TargetRef == nil {
			continue
		}
		ref := vpa.Spec.TargetRef
		o, ok := customOwner(vpa.Namespace, ref.APIVersion, ref.Kind, ref.Name)
		if !ok || r.ownerNotScalable(ctx, o) {
			continue
		}
		out[o.Key()] = append(out[o.Key()], vpa)
	}
	return out
}

// selectorTarget returns the VPA's target when it selects pods by label. A
// target that cannot be resolved is passed over (logged), unless the error
// says to retry later (RetryLater): then it is returned.
func (r *Resolver) selectorTarget(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (Target, bool, error) {
	t, err := r.Target(ctx, vpa)
	if RetryLater(ctx, err) {
		return Target{}, false, err
	}
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Cannot resolve VPA target", "vpa", klog.KObj(vpa), "err", err)
		return Target{}, false, nil
	}
	return t, t.Owner == nil && t.Selector != nil, nil
}

// matches reports whether the target's selector matches the pod, in the
// VPA's namespace.
func matches(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, t Target) bool {
	return vpaapiutil.PodMatchesVPA(pod, &vpaapiutil.VpaWithSelector{Vpa: vpa, Selector: t.Selector})
}

// ownerNotScalable reports whether discovery says the owner's kind has no
// /scale subresource: it serves the kind without one, or does not serve it
// (false when it cannot tell).
func (r *Resolver) ownerNotScalable(ctx context.Context, owner Owner) bool {
	if r.kinds == nil {
		return false
	}
	info, err := r.kinds.Lookup(ctx, schema.GroupKind{Group: owner.Group, Kind: owner.Kind})
	return err == nil && !info.Scalable
}
