// Package target finds the VPA that controls a pod and the pods a VPA
// targets.
//
// Three rules say which VPAs may control a pod:
//
//  1. Upstream VPA's rule, kept as it is: the VPA's targetRef names a
//     controller (a well-known workload, or any resource exposing /scale);
//     the pod's top-most well-known or scalable controller must be that
//     controller, and the pod's labels must match the controller's selector.
//  2. For custom controllers that own pods directly (StrimziPodSet and the
//     like): when the targetRef names a resource outside the core API group,
//     of a kind that is not well-known, which API discovery serves without a
//     /scale subresource, the VPA's pods are those whose controller
//     ownerReference names it: same namespace, API group, kind and name.
//     Upstream resolves no such target, and its walk from a pod up its
//     owners stops at such a controller.
//  3. For targets that own pods through objects of their own (a
//     KafkaNodePool owns a StrimziPodSet, which controls the broker pods,
//     through an ownerReference with controller: false): when the targetRef
//     names a custom resource with /scale, the VPA's pods are those its
//     selector matches which reach it through ownerReferences, controller or
//     not, via objects that are neither well-known controllers nor of the
//     core API group (reachableOwners: at most MaxOwnerDepth steps, each
//     object once). The objects in between are read (their metadata only),
//     so the components need get on their resources.
//
// When several VPAs may control a pod, under one rule or several, the
// oldest wins (then the first by name).
//
// Upstream's resolution reads well-known controllers from informer caches;
// one missing from them when upstream's walk or selector fetch fails is
// read from the API server (pastLaggingCaches, selectorPastLaggingCaches):
// the caches lag, and a pod is admitted once.
//
// The Resolver (resolver.go) resolves a VPA's target and keeps it for
// SelectorTTL; VPAForPod (vpaforpod.go) applies the rules above to a pod,
// looking only at the VPAs the indexes of index.go name.
package target

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpatarget "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
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

// upstreamReadTimeout bounds one call into upstream's target or controller
// resolution that may read the API server (a custom resource's /scale):
// its clients have no timeout of their own.
const upstreamReadTimeout = 10 * time.Second

// Resolver maps pods to their VPA and VPAs to their target.
type Resolver struct {
	vpas        cache.Indexer
	selectors   vpatarget.VpaTargetSelectorFetcher
	controllers controllerfetcher.ControllerFetcher
	kinds       Kinds
	owners      OwnerReader
	// liveSelectors, if set, reads the selectors of well-known targets
	// missing from the informer caches.
	liveSelectors SelectorReader
	budget        *ReadBudget
	now           func() time.Time

	// targets shares the resolution of one VPA's target among the pods
	// that need it at once.
	targets flights[cachedTarget]

	mu    sync.Mutex
	cache map[types.UID]cachedTarget
}

type cachedTarget struct {
	targetRef string
	target    Target
	err       error
	at        time.Time
}

// Option configures a Resolver.
type Option func(*Resolver)

// WithOwners makes the Resolver follow ownerReferences up from pods through
// the objects owners reads (rule 3 of the package comment). Without it,
// only rules 1 and 2 apply.
func WithOwners(owners OwnerReader) Option {
	return func(r *Resolver) { r.owners = owners }
}

// WithReadBudget makes the reads upstream's resolution does for custom
// resources (their /scale) take shares of budget, as the owner walk's do.
// Without it, the Resolver has a budget of its own (DefaultProcessReads,
// DefaultNamespaceReads).
func WithReadBudget(budget *ReadBudget) Option {
	return func(r *Resolver) { r.budget = budget }
}

// NewResolver builds a Resolver from its parts. vpas is the VPA indexer
// (an informer's); NewResolver adds the indexes it reads (indexVPAs). kinds
// tells which targets are custom resources without /scale (nil: upstream's
// rule only). now is the clock (time.Now in production).
func NewResolver(vpas cache.Indexer, selectors vpatarget.VpaTargetSelectorFetcher,
	controllers controllerfetcher.ControllerFetcher, kinds Kinds, now func() time.Time, opts ...Option) (*Resolver, error) {
	if err := indexVPAs(vpas); err != nil {
		return nil, err
	}
	r := &Resolver{vpas: vpas, selectors: selectors, controllers: controllers, kinds: kinds, now: now, cache: map[types.UID]cachedTarget{}}
	for _, o := range opts {
		o(r)
	}
	if r.budget == nil {
		r.budget = NewReadBudget(DefaultProcessReads, DefaultNamespaceReads)
	}
	return r, nil
}

// NewClusterResolver wires upstream VPA's selector and controller fetchers,
// API discovery, and the metadata of the objects between pods and their
// targets, to a cluster. It registers informers for the well-known
// controllers on factory and indexes vpas: call it before starting either.
//
// The reads that tenants' objects cause (discovery, /scale, owners'
// metadata) go through clients of their own, built from config with rate
// limiters of their own: they never spend the budget of the caller's
// clients (the updater's resizes), and take shares of one ReadBudget.
func NewClusterResolver(ctx context.Context, config *rest.Config, factory informers.SharedInformerFactory,
	vpas cache.SharedIndexInformer) (*Resolver, error) {
	reads, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("building the target resolution client: %w", err)
	}
	selectors := newRefreshingFetcher(ctx, time.Now, func(stop <-chan struct{}) vpatarget.VpaTargetSelectorFetcher {
		return vpatarget.NewVpaTargetSelectorFetcher(config, reads, factory, stop)
	})
	controllers := controllerfetcher.NewControllerFetcher(config, reads, factory, 10*time.Minute, time.Hour, 0.1, ctx.Done())
	controllers.Start(ctx, time.Minute)
	meta, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("building the metadata client: %w", err)
	}
	kinds := NewDiscoveryKinds(reads.Discovery(), time.Now)
	budget := NewReadBudget(DefaultProcessReads, DefaultNamespaceReads)
	return NewResolver(vpas.GetIndexer(), selectors, controllers, kinds, time.Now,
		WithOwners(NewMetadataOwners(meta, kinds, budget, time.Now)), WithReadBudget(budget),
		WithSelectorReader(NewAPISelectors(reads, budget)))
}

// Target returns how the VPA's pods are found: a label selector, or the
// custom resource that controls them. Concurrent callers share one
// resolution, each waiting no longer than its context allows. An error
// for which RetryLater is true says nothing about the target and is not
// remembered.
func (r *Resolver) Target(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (Target, error) {
	if vpa.Spec.TargetRef == nil {
		return Target{}, fmt.Errorf("vpa %s/%s has no targetRef", vpa.Namespace, vpa.Name)
	}
	ref := targetRefString(vpa)
	r.mu.Lock()
	c, ok := r.cache[vpa.UID]
	r.mu.Unlock()
	if ok && c.fresh(r.now(), ref) {
		return c.target, c.err
	}
	key := vpa.Namespace + "/" + vpa.Name + "/" + string(vpa.UID) + "/" + ref
	c, err := r.targets.do(ctx, key, func(ctx context.Context) cachedTarget {
		r.mu.Lock()
		c, ok := r.cache[vpa.UID]
		r.mu.Unlock()
		if ok && c.fresh(r.now(), ref) {
			return c
		}
		now := r.now()
		t, err := r.resolve(ctx, vpa)
		c = cachedTarget{targetRef: ref, target: t, err: err, at: now}
		if ctx.Err() == nil && !errors.Is(err, ErrNamespaceBusy) {
			r.mu.Lock()
			r.cache[vpa.UID] = c
			r.mu.Unlock()
		}
		return c
	})
	if err != nil {
		return Target{}, fmt.Errorf("resolving the target of %s: %w", ref, err)
	}
	return c.target, c.err
}

// fresh tells whether c answers for targetRef ref at now.
func (c cachedTarget) fresh(now time.Time, ref string) bool {
	ttl := SelectorTTL
	if c.err != nil {
		ttl = SelectorErrorTTL
	}
	return c.targetRef == ref && now.Sub(c.at) < ttl
}

// RetryLater tells whether err, from VPAForPod or Target, says nothing
// about the pod or the VPA: the caller's context ended, or the namespace's
// share of reads (ReadBudget) was in use. Try again later.
func RetryLater(ctx context.Context, err error) bool {
	return err != nil && (ctx.Err() != nil || errors.Is(err, ErrNamespaceBusy))
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
		gk := schema.GroupKind{Group: owner.Group, Kind: owner.Kind}
		info, err := r.kinds.Lookup(ctx, gk)
		switch {
		case err != nil:
			lookupErr = err
		case !info.Served:
			// Upstream's fetch would fail too, after a lookup in its REST
			// mapper: a kind nobody serves costs no read.
			return Target{}, fmt.Errorf("target %s: kind %s is not served by the API server", targetRefString(vpa), gk)
		case !info.Scalable:
			return Target{Owner: &owner}, nil
		}
	}
	sel, err := r.fetchSelector(ctx, vpa)
	if err != nil {
		if lookupErr != nil {
			err = fmt.Errorf("%w (and %w)", err, lookupErr)
		}
		return Target{}, fmt.Errorf("fetching selector of %s: %w", targetRefString(vpa), err)
	}
	return Target{Selector: sel}, nil
}

// fetchSelector is upstream's selector fetch. For a target that is not a
// well-known controller it reads the target's /scale: that read takes a
// share of the VPA's namespace's budget and is bounded in time.
func (r *Resolver) fetchSelector(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	if wellKnownKinds[vpa.Spec.TargetRef.Kind] {
		sel, err := r.selectors.Fetch(ctx, vpa)
		if err != nil && ctx.Err() == nil {
			return r.selectorPastLaggingCaches(ctx, vpa, err)
		}
		return sel, err
	}
	release, err := r.budget.Acquire(ctx, vpa.Namespace)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, upstreamReadTimeout)
	defer cancel()
	return r.selectors.Fetch(ctx, vpa)
}

// Forget drops what is cached for a VPA (call it when the VPA is deleted).
func (r *Resolver) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, uid)
}
