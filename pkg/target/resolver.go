// Package target finds the VPA that controls a pod and the pods a VPA
// targets.
//
// Upstream VPA's rule, kept as it is: the VPA's targetRef names a controller
// (a well-known workload, or any resource exposing /scale); the pod's
// top-most well-known or scalable controller must be that controller, and the
// pod's labels must match the controller's selector.
//
// Added for custom controllers that own pods directly (StrimziPodSet and the
// like): when the targetRef names a resource outside the core API group, of
// a kind that is not well-known, which API discovery serves without a /scale
// subresource, the VPA's pods are those whose controller ownerReference names
// it: same namespace, API group, kind and name. Upstream resolves no such
// target, and its walk from a pod up its owners stops at such a controller,
// so the two rules never claim the same pod.
//
// When several VPAs match a pod, the oldest wins (then the first by name),
// under either rule.
package target

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpatarget "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"
)

// SelectorTTL is how long a VPA's target (its selector, or the custom
// resource owning its pods) is reused before it is resolved again. Selectors
// of well-known controllers come from informer caches; others cost a /scale
// request.
const SelectorTTL = 30 * time.Second

// SelectorErrorTTL is how long a failure to resolve a target is reused. It
// is short: a target created just after its VPA (or not yet in an informer
// cache) must be found at once, while the pods of a VPA whose target is
// missing, resolved together, cost one fetch.
const SelectorErrorTTL = time.Second

// targetRefIndex is the index of VPAs by the namespace, kind and name of
// their targetRef (the API group apart): the only VPAs that can control a
// pod are those indexed under its top-most controller, or under the custom
// resource that controls it.
const targetRefIndex = "vpa-inplace.dev/target-ref"

func targetRefKey(namespace, kind, name string) string {
	return namespace + "/" + kind + "/" + name
}

func indexByTargetRef(obj any) ([]string, error) {
	vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok || vpa.Spec.TargetRef == nil {
		return nil, nil
	}
	return []string{targetRefKey(vpa.Namespace, vpa.Spec.TargetRef.Kind, vpa.Spec.TargetRef.Name)}, nil
}

// indexVPAs adds to a VPA indexer (an informer's, before it starts) the
// indexes the Resolver reads: targetRefIndex and, when missing, the
// namespace index. Adding them again is a no-op.
func indexVPAs(indexer cache.Indexer) error {
	have := indexer.GetIndexers()
	add := cache.Indexers{}
	if _, ok := have[targetRefIndex]; !ok {
		add[targetRefIndex] = indexByTargetRef
	}
	if _, ok := have[cache.NamespaceIndex]; !ok {
		add[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	}
	if len(add) == 0 {
		return nil
	}
	if err := indexer.AddIndexers(add); err != nil {
		return fmt.Errorf("indexing VPAs by target: %w", err)
	}
	return nil
}

// Resolver maps pods to their VPA and VPAs to their target.
type Resolver struct {
	vpas        cache.Indexer
	selectors   vpatarget.VpaTargetSelectorFetcher
	controllers controllerfetcher.ControllerFetcher
	kinds       Kinds
	now         func() time.Time

	mu    sync.Mutex
	cache map[types.UID]cachedTarget
}

type cachedTarget struct {
	targetRef string
	target    Target
	err       error
	at        time.Time
}

// NewResolver builds a Resolver from its parts. vpas is the VPA indexer
// (an informer's); NewResolver adds the indexes it reads (indexVPAs). kinds
// tells which targets are custom resources without /scale (nil: upstream's
// rule only). now is the clock (time.Now in production).
func NewResolver(vpas cache.Indexer, selectors vpatarget.VpaTargetSelectorFetcher,
	controllers controllerfetcher.ControllerFetcher, kinds Kinds, now func() time.Time) (*Resolver, error) {
	if err := indexVPAs(vpas); err != nil {
		return nil, err
	}
	return &Resolver{vpas: vpas, selectors: selectors, controllers: controllers, kinds: kinds, now: now, cache: map[types.UID]cachedTarget{}}, nil
}

// NewClusterResolver wires upstream VPA's selector and controller fetchers,
// and API discovery, to a cluster. It registers informers for the well-known
// controllers on factory and indexes vpas: call it before starting either.
func NewClusterResolver(ctx context.Context, config *rest.Config, kube kubernetes.Interface, factory informers.SharedInformerFactory,
	vpas cache.SharedIndexInformer) (*Resolver, error) {
	selectors := vpatarget.NewVpaTargetSelectorFetcher(config, kube, factory, ctx.Done())
	controllers := controllerfetcher.NewControllerFetcher(config, kube, factory, 10*time.Minute, time.Hour, 0.1, ctx.Done())
	controllers.Start(ctx, time.Minute)
	return NewResolver(vpas.GetIndexer(), selectors, controllers, NewDiscoveryKinds(kube.Discovery(), time.Now), time.Now)
}

// Target returns how the VPA's pods are found: a label selector, or the
// custom resource that controls them.
func (r *Resolver) Target(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (Target, error) {
	if vpa.Spec.TargetRef == nil {
		return Target{}, fmt.Errorf("vpa %s/%s has no targetRef", vpa.Namespace, vpa.Name)
	}
	ref := targetRefString(vpa)
	now := r.now()
	r.mu.Lock()
	c, ok := r.cache[vpa.UID]
	r.mu.Unlock()
	ttl := SelectorTTL
	if c.err != nil {
		ttl = SelectorErrorTTL
	}
	if ok && c.targetRef == ref && now.Sub(c.at) < ttl {
		return c.target, c.err
	}
	t, err := r.resolve(ctx, vpa)
	r.mu.Lock()
	r.cache[vpa.UID] = cachedTarget{targetRef: ref, target: t, err: err, at: now}
	r.mu.Unlock()
	return t, err
}

func targetRefString(vpa *vpatypes.VerticalPodAutoscaler) string {
	return vpa.Spec.TargetRef.APIVersion + "/" + vpa.Spec.TargetRef.Kind + "/" + vpa.Spec.TargetRef.Name
}

// resolve finds the VPA's target: a custom resource without /scale owns its
// pods; anything else is upstream's selector. When discovery cannot tell,
// upstream's resolution is tried, so that what it resolves keeps working.
func (r *Resolver) resolve(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (Target, error) {
	ref := vpa.Spec.TargetRef
	var lookupErr error
	if owner, ok := customOwner(vpa.Namespace, ref.APIVersion, ref.Kind, ref.Name); ok && r.kinds != nil {
		info, err := r.kinds.Lookup(ctx, schema.GroupKind{Group: owner.Group, Kind: owner.Kind})
		switch {
		case err != nil:
			lookupErr = err
		case info.Served && !info.Scalable:
			return Target{Owner: &owner}, nil
		}
	}
	sel, err := r.selectors.Fetch(ctx, vpa)
	if err != nil {
		if lookupErr != nil {
			err = fmt.Errorf("%w (and %w)", err, lookupErr)
		}
		return Target{}, fmt.Errorf("fetching selector of %s: %w", targetRefString(vpa), err)
	}
	return Target{Selector: sel}, nil
}

// Forget drops what is cached for a VPA (call it when the VPA is deleted).
func (r *Resolver) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, uid)
}

// VPAForPod returns the VPA controlling pod, or nil when there is none. VPAs
// whose target cannot be resolved are passed over (and logged).
//
// Only the VPAs indexed under the pod's controller are looked at, never all
// VPAs of the namespace: a pod is decided in the same time whether its
// namespace holds one VPA or thousands.
func (r *Resolver) VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	if !r.hasVPAs(pod.Namespace) {
		// Nothing to find: not even the pod's controllers are looked up.
		return nil, nil
	}
	logger := klog.FromContext(ctx)

	// A custom resource without /scale that controls the pod: its oldest
	// VPA.
	if owner, ok := CustomOwnerOf(pod); ok {
		vpas, err := r.byTargetRef(pod.Namespace, owner.Kind, owner.Name)
		if err != nil {
			return nil, err
		}
		var owned *vpatypes.VerticalPodAutoscaler
		for _, vpa := range vpas {
			t, err := r.Target(ctx, vpa)
			if err != nil {
				logger.V(4).Info("Cannot resolve VPA target", "vpa", klog.KObj(vpa), "err", err)
				continue
			}
			if t.Owner != nil && *t.Owner == owner && vpaapiutil.Stronger(vpa, owned) {
				owned = vpa
			}
		}
		if owned != nil {
			return owned, nil
		}
		if r.ownerHasNoScale(ctx, owner) {
			// Upstream's walk stops at such a controller and finds no VPA:
			// not walking also spares its REST mapper a lookup, which
			// would load discovery before the CRDs created after it.
			return nil, nil
		}
	}

	// Upstream's rule (vpaapiutil.GetControllingVPAForPod): the strongest
	// VPA whose targetRef names the pod's top-most well-known or scalable
	// controller and whose selector matches the pod's labels.
	parent, err := vpaapiutil.FindParentControllerForPod(ctx, pod, r.controllers)
	if err != nil {
		// Upstream passes such a pod over too: a controller that is gone or
		// cannot be walked (a custom resource without /scale and no VPA).
		logger.V(4).Info("Cannot find the pod's top-most controller", "err", err)
		return nil, nil
	}
	if parent == nil {
		return nil, nil
	}
	vpas, err := r.byTargetRef(parent.Namespace, parent.Kind, parent.Name)
	if err != nil {
		return nil, err
	}
	var controlling *vpatypes.VerticalPodAutoscaler
	for _, vpa := range vpas {
		t, err := r.Target(ctx, vpa)
		if err != nil {
			logger.V(4).Info("Cannot resolve VPA target", "vpa", klog.KObj(vpa), "err", err)
			continue
		}
		if t.Owner != nil || t.Selector == nil {
			continue
		}
		if vpaapiutil.PodMatchesVPA(pod, &vpaapiutil.VpaWithSelector{Vpa: vpa, Selector: t.Selector}) && vpaapiutil.Stronger(vpa, controlling) {
			controlling = vpa
		}
	}
	return controlling, nil
}

// ownerHasNoScale reports whether discovery serves the owner's kind without
// a /scale subresource (false when it cannot tell).
func (r *Resolver) ownerHasNoScale(ctx context.Context, owner Owner) bool {
	if r.kinds == nil {
		return false
	}
	info, err := r.kinds.Lookup(ctx, schema.GroupKind{Group: owner.Group, Kind: owner.Kind})
	return err == nil && info.Served && !info.Scalable
}

// hasVPAs reports whether namespace holds a VPA. The namespace index keeps
// no empty entries, so its values are the namespaces that hold VPAs: one
// string per such namespace, whatever their number of VPAs.
func (r *Resolver) hasVPAs(namespace string) bool {
	return slices.Contains(r.vpas.ListIndexFuncValues(cache.NamespaceIndex), namespace)
}

// byTargetRef returns the VPAs whose targetRef names kind and name in
// namespace, whatever its API group.
func (r *Resolver) byTargetRef(namespace, kind, name string) ([]*vpatypes.VerticalPodAutoscaler, error) {
	objs, err := r.vpas.ByIndex(targetRefIndex, targetRefKey(namespace, kind, name))
	if err != nil {
		return nil, fmt.Errorf("looking up VPAs by target: %w", err)
	}
	out := make([]*vpatypes.VerticalPodAutoscaler, 0, len(objs))
	for _, obj := range objs {
		if vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler); ok {
			out = append(out, vpa)
		}
	}
	return out, nil
}

// HasVPAs reports whether namespace holds a VPA, for callers that can skip
// work (decoding a pod under admission) when it does not.
func (r *Resolver) HasVPAs(namespace string) bool { return r.hasVPAs(namespace) }
