package admission

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
)

// reviewPod applies the recommendation of an InPlace VPA to a new pod. The
// namespace is checked first, then the pod is decoded once, into what the
// decision needs, and the patch is computed from that.
func (h *Handler) reviewPod(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	if req.Resource != podsResource {
		return nil, badRequest("%s handles %s, got a request for %s", MutatePodsPath, gvrString(podsResource), gvrString(req.Resource))
	}
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.SubResource != "" || req.Operation != admissionv1.Create {
		return allowed, nil
	}
	if len(req.Object.Raw) == 0 {
		return nil, badRequest("object: missing: expected a v1 Pod")
	}
	// A pod being created may not carry its namespace yet: the request's
	// is the one. Without a VPA there, there is nothing to decode.
	if ns := req.Namespace; ns != "" && (!h.watches(ns) || (h.namespaces != nil && !h.namespaces.HasVPAs(ns))) {
		return allowed, nil
	}
	pod, shape, err := decodePod(req.Object.Raw, req.Namespace)
	if errors.Is(err, errPodTooLarge) {
		h.cfg.Metrics.mutationFailures.WithLabelValues(FailureTooLarge).Inc()
		klog.FromContext(ctx).Info("Admitting a new pod unchanged", "pod", klog.KRef(req.Namespace, req.Name), "err", err)
		return allowed, nil
	}
	if err != nil {
		return nil, badRequest("object: %v", err)
	}
	if !h.watches(pod.Namespace) {
		return allowed, nil
	}
	// At creation the name may still be unset (generateName).
	ref := klog.KRef(pod.Namespace, cmp.Or(pod.Name, pod.GenerateName))
	logger := klog.FromContext(ctx).WithValues("pod", ref)
	ctx = klog.NewContext(ctx, logger)

	b := getPatchBuilder()
	defer putPatchBuilder(b)
	vpa, boosts, step, err := h.podPatch(ctx, b, shape, pod)
	if err != nil {
		h.cfg.Metrics.mutationFailures.WithLabelValues(step).Inc()
		if target.RetryLater(ctx, err) {
			// The pod's namespace has its share of reads in use, or time
			// ran out: counted, but logged only at V(2), or a tenant's
			// pods would write one error line each.
			logger.V(2).Info("Admitting a new pod unchanged: its VPA could not be looked up in time", "step", step, "err", err)
			return allowed, nil
		}
		logger.Error(err, "Cannot apply the recommendation to a new pod, admitting it unchanged", "step", step)
		return allowed, nil
	}
	if len(boosts) > 0 {
		h.recordBoosts(ctx, vpa, pod, boosts, req.DryRun != nil && *req.DryRun)
	}
	patch := b.finish()
	if patch == nil {
		return allowed, nil
	}
	h.cfg.Metrics.mutations.Inc()
	if logger.V(2).Enabled() {
		logger.V(2).Info("Applied the recommendation to a new pod", "vpa", klog.KObj(vpa), "operations", b.n)
	}
	patchType := admissionv1.PatchTypeJSONPatch
	// Copied: b goes back to its pool.
	allowed.Patch, allowed.PatchType = bytes.Clone(patch), &patchType
	return allowed, nil
}

// podPatch works out the patch of a new pod into b, and the startup boosts
// of its containers. On failure it names the step that failed. A panic in
// any step is a failure too.
func (h *Handler) podPatch(ctx context.Context, b *patchBuilder, shape *podShape, pod *corev1.Pod) (
	vpa *vpatypes.VerticalPodAutoscaler, boosts []containerBoost, step string, err error) {
	step = FailureResolveVPA
	defer func() {
		if r := recover(); r != nil {
			boosts, step, err = nil, FailurePanic, fmt.Errorf("panic while %s: %v\n%s", step, r, debug.Stack())
		}
	}()
	vpa, err = h.cfg.VPAs.VPAForPod(ctx, pod)
	if err != nil {
		return nil, nil, step, fmt.Errorf("finding the pod's VPA: %w", err)
	}
	if vpa == nil {
		klog.FromContext(ctx).V(4).Info("No VPA controls the pod")
		return nil, nil, "", nil
	}
	if mode := vpaapiutil.GetUpdateMode(vpa); mode != vpatypes.UpdateModeInPlace {
		klog.FromContext(ctx).V(4).Info("Leaving the pod to its VPA's mode", "vpa", klog.KObj(vpa), "updateMode", mode)
		return vpa, nil, "", nil
	}
	step = FailureRecommendation
	desired, err := h.cfg.Recommendations.ForPod(pod, vpa)
	if err != nil {
		return vpa, nil, step, fmt.Errorf("computing the recommendation of VPA %s: %w", klog.KObj(vpa), err)
	}
	var annotations []annotation
	if hold, ok := h.cfg.Holds.HoldOf(vpa); ok && len(desired) > 0 {
		desired, annotations = holding(desired, hold, h.cfg.Now())
		if len(annotations) > 0 {
			klog.FromContext(ctx).V(2).Info("Giving a new pod what its VPA's hold after harm holds instead of the recommendation",
				"vpa", klog.KObj(vpa), "held", annotations[0].value)
		}
	}
	if len(desired) > 0 {
		// After the hold's annotation, before the boosts': sorted by key.
		var floored []annotation
		var problem string
		desired, floored, problem = jvmFloors(shape, pod, vpa, desired)
		if problem != "" {
			klog.FromContext(ctx).V(2).Info("The VPA's JVM annotation cannot be read; only what the pod's spec states of its JVMs is used",
				"vpa", klog.KObj(vpa), "err", problem)
		}
		if len(floored) > 0 {
			klog.FromContext(ctx).V(2).Info("Giving a new pod its JVMs' heap floors instead of lower memory recommended",
				"vpa", klog.KObj(vpa), "raised", floored[0].value)
			annotations = append(annotations, floored...)
		}
	}
	if h.boosting(vpa) {
		step = FailureStartupBoost
		adm, err := h.cfg.Limits.admission(pod.Namespace)
		if err != nil {
			return vpa, nil, step, err
		}
		var boosted []annotation
		desired, boosted, boosts = startupBoosts(shape, pod, vpa, desired, &adm)
		// Sorted by key, as build wants them: the hold's sorts first.
		annotations = append(annotations, boosted...)
	}
	if len(desired) == 0 && len(annotations) == 0 {
		klog.FromContext(ctx).V(4).Info("The VPA has no recommendation for the pod yet", "vpa", klog.KObj(vpa))
		return vpa, boosts, "", nil
	}
	// Container values bounded by pod-level resources: those follow them.
	desired = withPodLevel(pod, desired)
	step = FailurePatch
	if err := b.build(shape, pod, desired, vpa.Name, annotations); err != nil {
		return vpa, nil, step, fmt.Errorf("building the patch: %w", err)
	}
	return vpa, boosts, "", nil
}

// recordBoosts counts the startup boosts of a new pod and records them as
// events on its VPA (not on the pod, which does not exist yet). The
// recorder queues events and sends them in the background, dropping them
// when its queue is full: it never delays the review. A dry run is neither
// counted nor recorded.
func (h *Handler) recordBoosts(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler, pod *corev1.Pod, boosts []containerBoost, dryRun bool) {
	if dryRun {
		return
	}
	logger := klog.FromContext(ctx)
	owner := podOwner(pod)
	for _, cb := range boosts {
		if cb.skipped != "" {
			h.cfg.Metrics.startupBoosts.WithLabelValues(StartupBoostSkipped).Inc()
			logger.V(2).Info("Not boosting the CPU of a container of a new pod", "vpa", klog.KObj(vpa), "container", cb.container, "reason", cb.skipped)
			if h.cfg.Recorder != nil {
				h.cfg.Recorder.Eventf(vpa, corev1.EventTypeWarning, ReasonStartupBoostSkipped,
					"Not boosting the CPU of container %s of a new pod of %s: %s", cb.container, owner, cb.skipped)
			}
			continue
		}
		duration := boost.Duration(vpa, cb.container)
		if cb.capped != "" {
			h.cfg.Metrics.startupBoosts.WithLabelValues(StartupBoostCapped).Inc()
			logger.V(2).Info("Boosting the CPU of a container of a new pod, less than its policy asks", "vpa", klog.KObj(vpa),
				"container", cb.container, "from", cb.from.String(), "to", cb.to.String(), "wanted", cb.wanted.String(),
				"duration", duration, "cappedBy", cb.capped)
			if h.cfg.Recorder != nil {
				h.cfg.Recorder.Eventf(vpa, corev1.EventTypeWarning, ReasonStartupBoostCapped,
					"Boosted CPU of container %s of a new pod of %s from %s to %s for %s after Ready, less than its policy asks (%s): %s",
					cb.container, owner, cb.from.String(), cb.to.String(), duration, cb.wanted.String(), cb.capped)
			}
			continue
		}
		h.cfg.Metrics.startupBoosts.WithLabelValues(StartupBoostApplied).Inc()
		logger.V(2).Info("Boosting the CPU of a container of a new pod", "vpa", klog.KObj(vpa), "container", cb.container,
			"from", cb.from.String(), "to", cb.to.String(), "duration", duration)
		if h.cfg.Recorder != nil {
			h.cfg.Recorder.Eventf(vpa, corev1.EventTypeNormal, ReasonStartupBoostApplied,
				"Boosted CPU of container %s of a new pod of %s from %s to %s for %s after Ready",
				cb.container, owner, cb.from.String(), cb.to.String(), duration)
		}
	}
}
