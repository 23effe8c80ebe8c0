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
package target

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
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

// customTargetIndex is the index of VPAs whose targetRef may name a custom
// resource (customOwner) by namespace: the targets the walk up a pod's
// owners looks for (rule 3).
const customTargetIndex = "vpa-inplace.dev/custom-target-namespace"

func indexByCustomTarget(obj any) ([]string, error) {
	vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok || vpa.Spec.TargetRef == nil {
		return nil, nil
	}
	ref := vpa.Spec.TargetRef
	if _, ok := customOwner(vpa.Namespace, ref.APIVersion, ref.Kind, ref.Name); !ok {
		return nil, nil
	}
	return []string{vpa.Namespace}, nil
}

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
	if _, ok := have[customTargetIndex]; !ok {
		add[customTargetIndex] = indexByCustomTarget
	}
	if len(add) == 0 {
		return nil
	}
	if err := indexer.AddIndexers(add); err != nil {
		return fmt.Errorf("indexing VPAs by target: %w", err)
	}
	return nil
}

// upstreamReadTimeout bounds one call into upstream's target or controller
// resolution that may read the API server (a custom resource's /scale):
// its clients have no timeout of their own.
const upstreamReadTimeout = 10 * time.Second

// ownerWalkTimeout bounds one walk up a pod's owners, whatever the
// caller's context (the updater's workers have no deadline of their own).
const ownerWalkTimeout = 10 * time.Second

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

// Forget drops what is cached for a VPA (call it when the VPA is deleted).
func (r *Resolver) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, uid)
}

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
