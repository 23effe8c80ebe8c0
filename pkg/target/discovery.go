package target

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

const (
	// DiscoveryTTL is how long what discovery said is used before it is read
	// again: a /scale subresource added to a CRD is seen within it.
	DiscoveryTTL = 5 * time.Minute
	// DiscoveryRetry is the shortest time between two reads of discovery:
	// asked about a kind it has not seen (a CRD installed since the last
	// read), or after a failed read, the lookup reads again no sooner.
	DiscoveryRetry = 10 * time.Second
	// discoveryTimeout bounds one read of discovery; a lookup waiting for
	// it waits no longer than its own context.
	discoveryTimeout = 30 * time.Second
)

// KindInfo is what discovery says about a kind.
type KindInfo struct {
	// Served: the API server serves the kind (in some version).
	Served bool
	// Scalable: some served version of the kind has a /scale subresource.
	Scalable bool
}

// KindResource is how objects of a served kind are read: the resource (in
// the first version discovery lists for the kind, its preferred one) and
// whether objects of it live in a namespace.
type KindResource struct {
	Resource   schema.GroupVersionResource
	Namespaced bool
}

// Resources maps kinds to the resources that serve them.
type Resources interface {
	// Resource returns the resource serving gk; ok is false when no
	// resource serves it. An error means discovery could not tell.
	Resource(ctx context.Context, gk schema.GroupKind) (r KindResource, ok bool, err error)
}

// Kinds looks kinds up in API discovery.
type Kinds interface {
	Lookup(ctx context.Context, gk schema.GroupKind) (KindInfo, error)
}

// ResourceDiscovery is the part of client-go's discovery client that
// DiscoveryKinds reads.
type ResourceDiscovery interface {
	ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error)
}

var (
	_ ResourceDiscovery = (*discovery.DiscoveryClient)(nil)
	_ Kinds             = (*DiscoveryKinds)(nil)
	_ Resources         = (*DiscoveryKinds)(nil)
)

// kindEntry is what discovery says about one served kind.
type kindEntry struct {
	scalable bool
	resource KindResource
}

// DiscoveryKinds answers Lookup from the API server's discovery documents,
// which every authenticated client may read: no RBAC rule is needed. It
// answers from the last read (a snapshot), reads again in the background
// once that is DiscoveryTTL old, and sooner (at most every DiscoveryRetry)
// when asked about a kind it has not seen. One read runs at a time, on a
// context of its own bounded by discoveryTimeout: a lookup of a kind the
// snapshot holds never waits for a read, and a lookup that waits (the
// first one, or one of a kind not seen) waits no longer than its context.
type DiscoveryKinds struct {
	client ResourceDiscovery
	now    func() time.Time
	reads  singleflight.Group

	mu sync.Mutex
	// snap is the last successful read; nil before the first.
	snap        *kindsSnapshot
	attemptedAt time.Time
	attemptErr  error
}

// kindsSnapshot is what one read of discovery said.
type kindsSnapshot struct {
	// kinds holds every served kind: whether it has /scale, and its
	// resource.
	kinds map[schema.GroupKind]kindEntry
	// failedGroups holds the groups whose discovery failed in the read.
	failedGroups map[string]error
	loadedAt     time.Time
}

// NewDiscoveryKinds builds a DiscoveryKinds; now is the clock.
func NewDiscoveryKinds(client ResourceDiscovery, now func() time.Time) *DiscoveryKinds {
	return &DiscoveryKinds{client: client, now: now}
}

// Lookup tells whether gk is served and whether it has /scale. An error
// means discovery could not tell (it failed, for all groups or for gk's),
// or ctx ended while the lookup waited for a read.
func (d *DiscoveryKinds) Lookup(ctx context.Context, gk schema.GroupKind) (KindInfo, error) {
	e, ok, err := d.lookup(ctx, gk)
	if err != nil || !ok {
		return KindInfo{}, err
	}
	return KindInfo{Served: true, Scalable: e.scalable}, nil
}

// Resource returns the resource serving gk, as Lookup finds it.
func (d *DiscoveryKinds) Resource(ctx context.Context, gk schema.GroupKind) (KindResource, bool, error) {
	e, ok, err := d.lookup(ctx, gk)
	if err != nil || !ok {
		return KindResource{}, false, err
	}
	return e.resource, true, nil
}

func (d *DiscoveryKinds) lookup(ctx context.Context, gk schema.GroupKind) (kindEntry, bool, error) {
	snap := d.snapshot()
	switch {
	case snap == nil:
		if err := d.refresh(ctx); err != nil {
			return kindEntry{}, false, err
		}
		snap = d.snapshot()
	case d.now().Sub(snap.loadedAt) >= DiscoveryTTL:
		// Answered from what was read; the next lookups see the new read.
		d.reads.DoChan(discoveryReadKey, d.read(ctx))
	}
	if snap != nil {
		if e, ok := snap.kinds[gk]; ok {
			return e, true, nil
		}
	}
	// Not seen: maybe installed since the last read.
	if err := d.refresh(ctx); err != nil {
		return kindEntry{}, false, err
	}
	snap = d.snapshot()
	if e, ok := snap.kinds[gk]; ok {
		return e, true, nil
	}
	if err := snap.failedGroups[gk.Group]; err != nil {
		return kindEntry{}, false, fmt.Errorf("discovery of group %q failed: %w", gk.Group, err)
	}
	return kindEntry{}, false, nil
}

func (d *DiscoveryKinds) snapshot() *kindsSnapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snap
}

// discoveryReadKey is the key of the one read of d.reads.
const discoveryReadKey = "discovery"

// refresh waits, as long as ctx allows, for a read of discovery: the one
// in progress, or a new one unless the last began less than DiscoveryRetry
// ago (then the error of that attempt, if any, is returned). A nil error
// means a snapshot is there.
func (d *DiscoveryKinds) refresh(ctx context.Context) error {
	select {
	case r := <-d.reads.DoChan(discoveryReadKey, d.read(ctx)):
		return r.Err
	case <-ctx.Done():
		return fmt.Errorf("waiting for API discovery: %w", ctx.Err())
	}
}

// read returns the function that reads discovery, once the last attempt is
// DiscoveryRetry old, on a context of its own that keeps ctx's values.
func (d *DiscoveryKinds) read(ctx context.Context) func() (any, error) {
	ctx = context.WithoutCancel(ctx)
	return func() (any, error) {
		now := d.now()
		d.mu.Lock()
		if !d.attemptedAt.IsZero() && now.Sub(d.attemptedAt) < DiscoveryRetry {
			err := d.attemptErr
			d.mu.Unlock()
			return nil, err
		}
		d.attemptedAt = now
		d.mu.Unlock()

		ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
		defer cancel()
		_, lists, err := d.client.ServerGroupsAndResourcesWithContext(ctx)
		failed := map[string]error{}
		var partial *discovery.ErrGroupDiscoveryFailed
		switch {
		case err == nil:
		case errors.As(err, &partial):
			for gv, gerr := range partial.Groups {
				failed[gv.Group] = gerr
			}
		default:
			err = fmt.Errorf("reading API discovery: %w", err)
			d.mu.Lock()
			d.attemptErr = err
			d.mu.Unlock()
			return nil, err
		}
		snap := &kindsSnapshot{kinds: kindsOf(lists), failedGroups: failed, loadedAt: now}
		d.mu.Lock()
		d.snap, d.attemptErr = snap, nil
		d.mu.Unlock()
		return nil, nil
	}
}

// kindsOf maps every kind of the resource lists to whether some version of
// it has a /scale subresource, and to its resource in the first version
// listed.
func kindsOf(lists []*metav1.APIResourceList) map[schema.GroupKind]kindEntry {
	kinds := map[schema.GroupKind]kindEntry{}
	for _, list := range lists {
		if list == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		resources := map[string]string{} // resource name -> kind
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				resources[r.Name] = r.Kind
				gk := schema.GroupKind{Group: gv.Group, Kind: r.Kind}
				if _, seen := kinds[gk]; !seen {
					kinds[gk] = kindEntry{resource: KindResource{Resource: gv.WithResource(r.Name), Namespaced: r.Namespaced}}
				}
			}
		}
		for _, r := range list.APIResources {
			resource, sub, ok := strings.Cut(r.Name, "/")
			if !ok || sub != "scale" {
				continue
			}
			if kind, ok := resources[resource]; ok {
				gk := schema.GroupKind{Group: gv.Group, Kind: kind}
				e := kinds[gk]
				e.scalable = true
				kinds[gk] = e
			}
		}
	}
	return kinds
}
