package target

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
)

const (
	// OwnerTTL is how long the ownerReferences read of an object are
	// reused. An object recreated under the same name is read again at
	// once: the ownerReference naming it carries the new UID.
	OwnerTTL = time.Minute
	// OwnerErrorTTL is how long a failed read, or an object found missing,
	// is reused before it is read again.
	OwnerErrorTTL = 5 * time.Second
	// ownerReadTimeout bounds one read, whatever the callers' contexts.
	ownerReadTimeout = 10 * time.Second
	// ownerCacheSweep is the size of the cache at which expired entries
	// are first dropped; after each sweep, twice the size left.
	ownerCacheSweep = 1024
)

// MetadataOwners reads the ownerReferences of custom resources with the
// metadata client (objects' metadata only, whatever their kind), finding
// the resource of a kind through discovery. What it reads is reused for
// OwnerTTL, failures and missing objects for OwnerErrorTTL, and concurrent
// reads of one object are one request: pods of one owner, synced
// together, cost one read. Each read takes a share of a ReadBudget (of the
// object's namespace), and ends when no caller waits for it any more.
// Safe for concurrent use.
type MetadataOwners struct {
	client    metadata.Interface
	resources Resources
	budget    *ReadBudget
	now       func() time.Time
	reads     flights[ownersEntry]

	mu        sync.Mutex
	cache     map[string]ownersEntry
	sweepAt   int
	forbidden map[schema.GroupResource]bool
}

var _ OwnerReader = (*MetadataOwners)(nil)

// ownersEntry is one read of an object.
type ownersEntry struct {
	uid   types.UID
	refs  []metav1.OwnerReference
	found bool
	err   error
	at    time.Time
}

// NewMetadataOwners builds a MetadataOwners whose reads take shares of
// budget (nil: a budget of its own, of DefaultProcessReads and
// DefaultNamespaceReads); now is the clock.
func NewMetadataOwners(client metadata.Interface, resources Resources, budget *ReadBudget, now func() time.Time) *MetadataOwners {
	if budget == nil {
		budget = NewReadBudget(DefaultProcessReads, DefaultNamespaceReads)
	}
	return &MetadataOwners{client: client, resources: resources, budget: budget, now: now,
		cache: map[string]ownersEntry{}, sweepAt: ownerCacheSweep, forbidden: map[schema.GroupResource]bool{}}
}

// OwnersOf implements OwnerReader. An object that may not be read (RBAC)
// is not walked through; that is logged once per resource. It returns
// ctx's error once ctx ends, and an error wrapping ErrNamespaceBusy when
// the namespace's share of reads is in use; neither is remembered.
func (m *MetadataOwners) OwnersOf(ctx context.Context, o Owner, uid types.UID) ([]metav1.OwnerReference, bool, error) {
	key := o.Key()
	m.mu.Lock()
	e, ok := m.cache[key]
	m.mu.Unlock()
	if ok && e.usable(m.now(), uid) {
		return e.answer(uid)
	}
	e, err := m.reads.do(ctx, key, func(ctx context.Context) ownersEntry {
		// A read that ended between the look above and now is used.
		m.mu.Lock()
		e, ok := m.cache[key]
		m.mu.Unlock()
		if ok && e.usable(m.now(), uid) {
			return e
		}
		e, keep := m.read(ctx, o)
		if keep {
			m.store(key, e)
		}
		return e
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading the owners of %s: %w", o, err)
	}
	return e.answer(uid)
}

// usable reports whether a cached read still answers for an object named
// with uid.
func (e ownersEntry) usable(now time.Time, uid types.UID) bool {
	age := now.Sub(e.at)
	if e.err != nil || !e.found {
		return age < OwnerErrorTTL
	}
	if uid != "" && uid != e.uid {
		// Another object than the one read: maybe recreated since. Read
		// again, but no more often than a failure.
		return age < OwnerErrorTTL
	}
	return age < OwnerTTL
}

func (e ownersEntry) answer(uid types.UID) ([]metav1.OwnerReference, bool, error) {
	switch {
	case e.err != nil:
		return nil, false, e.err
	case !e.found, uid != "" && uid != e.uid:
		return nil, false, nil
	}
	return e.refs, true, nil
}

// read reads the object's metadata, on the context of the callers that
// share it (its flight), within ownerReadTimeout and a share of the budget.
// keep is false when the outcome says nothing about the object (the
// callers gave up, the namespace's share was in use): it is not cached.
func (m *MetadataOwners) read(ctx context.Context, o Owner) (e ownersEntry, keep bool) {
	logger := klog.FromContext(ctx)
	callers := ctx
	ctx, cancel := context.WithTimeout(ctx, ownerReadTimeout)
	defer cancel()
	gk := schema.GroupKind{Group: o.Group, Kind: o.Kind}
	res, ok, err := m.resources.Resource(ctx, gk)
	switch {
	case callers.Err() != nil:
		return ownersEntry{err: callers.Err(), at: m.now()}, false
	case err != nil:
		return ownersEntry{err: fmt.Errorf("finding the resource of %s: %w", o, err), at: m.now()}, true
	case !ok || !res.Namespaced:
		return ownersEntry{at: m.now()}, true
	}
	release, err := m.budget.Acquire(ctx, o.Namespace)
	if err != nil {
		return ownersEntry{err: err, at: m.now()}, false
	}
	obj, err := m.client.Resource(res.Resource).Namespace(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	release()
	switch {
	case callers.Err() != nil:
		return ownersEntry{err: callers.Err(), at: m.now()}, false
	case apierrors.IsNotFound(err):
		return ownersEntry{at: m.now()}, true
	case apierrors.IsForbidden(err):
		gr := res.Resource.GroupResource()
		m.mu.Lock()
		first := !m.forbidden[gr]
		m.forbidden[gr] = true
		m.mu.Unlock()
		if first {
			logger.Info("Cannot read the owners of an object that owns pods: VPAs targeting its owners do not reach its pods; grant get on the resource",
				"resource", gr.String(), "object", o.String(), "err", err)
		}
		return ownersEntry{at: m.now()}, true
	case err != nil:
		return ownersEntry{err: fmt.Errorf("reading the owners of %s: %w", o, err), at: m.now()}, true
	}
	refs := obj.OwnerReferences
	if len(refs) > MaxOwnerObjects {
		refs = refs[:MaxOwnerObjects]
	}
	return ownersEntry{uid: obj.UID, refs: refs, found: true, at: m.now()}, true
}

// store caches a read, dropping expired reads once the cache has grown.
func (m *MetadataOwners) store(key string, e ownersEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cache[key] = e
	if len(m.cache) < m.sweepAt {
		return
	}
	now := m.now()
	for k, c := range m.cache {
		if now.Sub(c.at) >= OwnerTTL {
			delete(m.cache, k)
		}
	}
	m.sweepAt = max(ownerCacheSweep, 2*len(m.cache))
}
