// Package target finds the VPA that controls a pod and the pods a VPA
// targets, the way VPA users expect: the VPA's targetRef names a controller
// (a well-known workload, or any resource exposing /scale); the pod's
// top-most well-known or scalable controller must be that controller, and the
// pod's labels must match the controller's selector. When several VPAs match,
// the oldest wins. All of it is upstream VPA's target resolution.
package target

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"
	vpatarget "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"
)

// SelectorTTL is how long a VPA's target selector is reused before it is
// fetched again. Selectors of well-known controllers come from informer
// caches; others cost a /scale request.
const SelectorTTL = 30 * time.Second

// SelectorErrorTTL is how long a failure to fetch a selector is reused. It
// is short: a target created just after its VPA (or not yet in an informer
// cache) must be found at once, while the pods of a VPA whose target is
// missing, resolved together, cost one fetch.
const SelectorErrorTTL = time.Second

// Resolver maps pods to their VPA and VPAs to their selector.
type Resolver struct {
	vpas        vpalisters.VerticalPodAutoscalerLister
	selectors   vpatarget.VpaTargetSelectorFetcher
	controllers controllerfetcher.ControllerFetcher
	now         func() time.Time

	mu    sync.Mutex
	cache map[types.UID]cachedSelector
}

type cachedSelector struct {
	targetRef string
	selector  labels.Selector
	err       error
	at        time.Time
}

// NewResolver builds a Resolver from its parts. now is the clock (time.Now
// in production).
func NewResolver(vpas vpalisters.VerticalPodAutoscalerLister, selectors vpatarget.VpaTargetSelectorFetcher,
	controllers controllerfetcher.ControllerFetcher, now func() time.Time) *Resolver {
	return &Resolver{vpas: vpas, selectors: selectors, controllers: controllers, now: now, cache: map[types.UID]cachedSelector{}}
}

// NewClusterResolver wires upstream VPA's selector and controller fetchers to
// a cluster. It registers informers for the well-known controllers on
// factory: start the factory after calling it.
func NewClusterResolver(ctx context.Context, config *rest.Config, kube kubernetes.Interface, factory informers.SharedInformerFactory,
	vpas vpalisters.VerticalPodAutoscalerLister) *Resolver {
	selectors := vpatarget.NewVpaTargetSelectorFetcher(config, kube, factory, ctx.Done())
	controllers := controllerfetcher.NewControllerFetcher(config, kube, factory, 10*time.Minute, time.Hour, 0.1, ctx.Done())
	controllers.Start(ctx, time.Minute)
	return NewResolver(vpas, selectors, controllers, time.Now)
}

// Selector returns the label selector of the VPA's target.
func (r *Resolver) Selector(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	if vpa.Spec.TargetRef == nil {
		return nil, fmt.Errorf("vpa %s/%s has no targetRef", vpa.Namespace, vpa.Name)
	}
	ref := vpa.Spec.TargetRef.APIVersion + "/" + vpa.Spec.TargetRef.Kind + "/" + vpa.Spec.TargetRef.Name
	now := r.now()
	r.mu.Lock()
	c, ok := r.cache[vpa.UID]
	r.mu.Unlock()
	ttl := SelectorTTL
	if c.err != nil {
		ttl = SelectorErrorTTL
	}
	if ok && c.targetRef == ref && now.Sub(c.at) < ttl {
		return c.selector, c.err
	}
	sel, err := r.selectors.Fetch(ctx, vpa)
	if err != nil {
		err = fmt.Errorf("fetching selector of %s: %w", ref, err)
	}
	r.mu.Lock()
	r.cache[vpa.UID] = cachedSelector{targetRef: ref, selector: sel, err: err, at: now}
	r.mu.Unlock()
	return sel, err
}

// Forget drops what is cached for a VPA (call it when the VPA is deleted).
func (r *Resolver) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, uid)
}

// VPAForPod returns the VPA controlling pod, or nil when there is none. VPAs
// whose target cannot be resolved are passed over (and logged).
func (r *Resolver) VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	vpas, err := r.vpas.VerticalPodAutoscalers(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing VPAs of namespace %q: %w", pod.Namespace, err)
	}
	if len(vpas) == 0 {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	candidates := make([]*vpaapiutil.VpaWithSelector, 0, len(vpas))
	for _, vpa := range vpas {
		if vpa.Spec.TargetRef == nil {
			continue
		}
		sel, err := r.Selector(ctx, vpa)
		if err != nil {
			logger.V(4).Info("Cannot resolve VPA target", "vpa", klog.KObj(vpa), "err", err)
			continue
		}
		candidates = append(candidates, &vpaapiutil.VpaWithSelector{Vpa: vpa, Selector: sel})
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	match := vpaapiutil.GetControllingVPAForPod(ctx, pod, candidates, r.controllers)
	if match == nil {
		return nil, nil
	}
	return match.Vpa, nil
}
