package target

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

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
	// discoveryTimeout bounds one read of discovery: lookups wait for it.
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
// keeps what it read for DiscoveryTTL, and reads again sooner (at most every
// DiscoveryRetry) when asked about a kind it has not seen.
type DiscoveryKinds struct {
	client ResourceDiscovery
	now    func() time.Time

	mu sync.Mutex
	// kinds holds every served kind: whether it has /scale, and its
	// resource.
	kinds map[schema.GroupKind]kindEntry
	// failedGroups holds the groups whose discovery failed in the last read.
	failedGroups map[string]error
	loadedAt     time.Time
	loaded       bool
	attemptedAt  time.Time
	attemptErr   error
}

// NewDiscoveryKinds builds a DiscoveryKinds; now is the clock.
func NewDiscoveryKinds(client ResourceDiscovery, now func() time.Time) *DiscoveryKinds {
	return &DiscoveryKinds{client: client, now: now}
}

// Lookup tells whether gk is served and whether it has /scale. An error
// means discovery could not tell (it failed, for all groups or for gk's).
// Concurrent lookups wait for a read in progress.
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
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if !d.loaded || now.Sub(d.loadedAt) >= DiscoveryTTL {
		if err := d.load(ctx, now); err != nil && !d.loaded {
			return kindEntry{}, false, err
		}
	}
	if e, ok := d.kinds[gk]; ok {
		return e, true, nil
	}
	// Not seen: maybe installed since the last read.
	if err := d.load(ctx, now); err != nil {
		return kindEntry{}, false, err
	}
	if e, ok := d.kinds[gk]; ok {
		return e, true, nil
	}
	if err := d.failedGroups[gk.Group]; err != nil {
		return kindEntry{}, false, fmt.Errorf("discovery of group %q failed: %w", gk.Group, err)
	}
	return kindEntry{}, false, nil
}

// load reads discovery again unless it was read (or tried) less than
// DiscoveryRetry ago; then it returns the error of that attempt, if any.
func (d *DiscoveryKinds) load(ctx context.Context, now time.Time) error {
	if !d.attemptedAt.IsZero() && now.Sub(d.attemptedAt) < DiscoveryRetry {
		return d.attemptErr
	}
	d.attemptedAt = now
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
		d.attemptErr = fmt.Errorf("reading API discovery: %w", err)
		return d.attemptErr
	}
	d.attemptErr = nil
	d.kinds = kindsOf(lists)
	d.failedGroups = failed
	d.loadedAt, d.loaded = now, true
	return nil
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
