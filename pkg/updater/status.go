package updater

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
)

// The InPlaceResizeBlocked condition lives in the VPA's status.conditions,
// next to the recommender's own conditions. Upstream's recommender (v1.8)
// reads every condition of the VPA when it loads VPAs, keeps the ones it does
// not own, and writes the whole status back (a JSON patch "add /status"
// without resourceVersion). So the condition survives its writes, except for
// one race: a condition written between the recommender's load and its
// write is reverted to what it loaded. The VPA informer delivers that write;
// every VPA update queues the VPA here, so the condition is put back (no
// more than once per StatusMinInterval).

// syncStatus brings one VPA's InPlaceResizeBlocked condition up to date: it
// is written only when its status, reason or message differ from the VPA's,
// and no sooner than StatusMinInterval after the previous write.
func (c *Controller) syncStatus(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	vpa, err := c.vpas.VerticalPodAutoscalers(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading VPA from cache: %w", err)
	}
	var want *vpatypes.VerticalPodAutoscalerCondition
	if isInPlace(vpa) {
		cond := blockedCondition(summary{
			pods:    c.tracker.Of(key),
			jobs:    c.jobTracker.Of(key),
			paused:  c.pausedWhy(vpa),
			gateOff: !c.gate.Enabled(features.InPlace),
			dryRun:  c.cfg.DryRun,
		})
		want = &cond
	}
	now := c.now()
	conditions, changed := setCondition(vpa.Status.Conditions, want, now)
	if !changed {
		return nil
	}
	c.mu.Lock()
	last, written := c.statusWritten[key]
	c.mu.Unlock()
	if wait := c.cfg.StatusMinInterval - now.Sub(last); written && wait > 0 {
		c.statusQueue.AddAfter(key, wait)
		return nil
	}

	patch, err := statusPatch(vpa.ResourceVersion, conditions)
	if err != nil {
		return err
	}
	_, err = c.vpaClient.AutoscalingV1().VerticalPodAutoscalers(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		return nil
	default:
		// A conflict means the cache is behind: retried once it caught up.
		return fmt.Errorf("writing the %s condition: %w", ConditionInPlaceResizeBlocked, err)
	}
	c.mu.Lock()
	c.statusWritten[key] = now
	c.mu.Unlock()
	logger := klog.FromContext(ctx)
	if want == nil {
		logger.V(2).Info("Removed the VPA condition", "vpa", klog.KObj(vpa), "condition", ConditionInPlaceResizeBlocked)
		return nil
	}
	logger.V(2).Info("Wrote the VPA condition", "vpa", klog.KObj(vpa), "condition", ConditionInPlaceResizeBlocked,
		"status", want.Status, "reason", want.Reason, "message", want.Message)
	return nil
}

// statusPatch is a JSON merge patch of the status subresource replacing
// status.conditions (a list, replaced whole), guarded by resourceVersion so
// that a condition the recommender has just written is never overwritten
// with an older list.
func statusPatch(resourceVersion string, conditions []vpatypes.VerticalPodAutoscalerCondition) ([]byte, error) {
	if conditions == nil {
		conditions = []vpatypes.VerticalPodAutoscalerCondition{}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   map[string]any{"conditions": conditions},
	})
}

func hasCondition(vpa *vpatypes.VerticalPodAutoscaler) bool {
	for _, c := range vpa.Status.Conditions {
		if c.Type == ConditionInPlaceResizeBlocked {
			return true
		}
	}
	return false
}
