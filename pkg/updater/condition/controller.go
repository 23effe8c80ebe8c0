package condition

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"
)

// The InPlaceResizeBlocked condition lives in the VPA's status.conditions,
// next to the recommender's own conditions. Upstream's recommender (v1.8)
// reads every condition of the VPA when it loads VPAs, keeps the ones it does
// not own, and writes the whole status back (a JSON patch "add /status"
// without resourceVersion). So the condition survives its writes, except for
// one race: a condition written between the recommender's load and its
// write is reverted to what it loaded. The VPA informer delivers that write;
// every VPA update queues the VPA here, so the condition is put back (no
// more than once per MinInterval).

// Delay lets the pods of a VPA settle before its condition is computed:
// changes within it make one write.
const Delay = time.Second

// DefaultMinInterval is the shortest time between two writes of one VPA's
// condition when Config.MinInterval is 0.
const DefaultMinInterval = 10 * time.Second

// Source tells what a VPA's condition is made from; false when the VPA is
// not in InPlace mode (then it carries no condition).
type Source func(vpa *vpatypes.VerticalPodAutoscaler) (Summary, bool)

// Config holds the controller's settings.
type Config struct {
	// MinInterval is the shortest time between two writes of one VPA's
	// condition; 0 means DefaultMinInterval, a negative value no limit.
	MinInterval time.Duration
}

// Deps are the controller's collaborators.
type Deps struct {
	VPAs   vpalisters.VerticalPodAutoscalerLister
	Client vpaclientset.Interface
	Source Source
	Clock  clock.PassiveClock
	// Requeue puts a VPA key back on the condition queue after a while.
	Requeue func(key string, after time.Duration)
}

// Controller writes the condition of one VPA per Sync.
type Controller struct {
	cfg  Config
	deps Deps

	mu sync.Mutex
	// written holds, per VPA key, when its condition was last written.
	written map[string]time.Time
}

// New returns a Controller.
func New(cfg Config, deps Deps) *Controller {
	if cfg.MinInterval == 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	return &Controller{cfg: cfg, deps: deps, written: map[string]time.Time{}}
}

// Forget drops what is remembered of a deleted VPA.
func (c *Controller) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.written, key)
}

// Sync brings one VPA's InPlaceResizeBlocked condition up to date: it is
// written only when its status, reason or message differ from the VPA's,
// and no sooner than MinInterval after the previous write.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	vpa, err := c.deps.VPAs.VerticalPodAutoscalers(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading VPA from cache: %w", err)
	}
	var want *vpatypes.VerticalPodAutoscalerCondition
	if s, ok := c.deps.Source(vpa); ok {
		cond := Blocked(s)
		want = &cond
	}
	now := c.deps.Clock.Now()
	conditions, changed := Set(vpa.Status.Conditions, want, now)
	if !changed {
		return nil
	}
	c.mu.Lock()
	last, written := c.written[key]
	c.mu.Unlock()
	if wait := c.cfg.MinInterval - now.Sub(last); written && wait > 0 {
		c.deps.Requeue(key, wait)
		return nil
	}

	patch, err := statusPatch(vpa.ResourceVersion, conditions)
	if err != nil {
		return err
	}
	_, err = c.deps.Client.AutoscalingV1().VerticalPodAutoscalers(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		return nil
	default:
		// A conflict means the cache is behind: retried once it caught up.
		return fmt.Errorf("writing the %s condition: %w", Type, err)
	}
	c.mu.Lock()
	c.written[key] = now
	c.mu.Unlock()
	logger := klog.FromContext(ctx)
	if want == nil {
		logger.V(2).Info("Removed the VPA condition", "vpa", klog.KObj(vpa), "condition", Type)
		return nil
	}
	logger.V(2).Info("Wrote the VPA condition", "vpa", klog.KObj(vpa), "condition", Type,
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

// Has reports whether vpa carries the condition.
func Has(vpa *vpatypes.VerticalPodAutoscaler) bool {
	for _, c := range vpa.Status.Conditions {
		if c.Type == Type {
			return true
		}
	}
	return false
}
