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

// Kinds looks kinds up in API discovery.
type Kinds interface {
	Lookup(ctx context.Context, gk schema.GroupKind) (KindInfo, error)
}

// ResourceDiscovery is the part of client-go's discovery client that
// DiscoveryKinds reads.
type ResourceDiscovery interface {
	ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error)
}

var _ ResourceDiscovery = (*discovery.DiscoveryClient)(nil)

// DiscoveryKinds answers Lookup from the API server's discovery documents,
// which every authenticated client may read: no RBAC rule is needed. It
// keeps what it read for DiscoveryTTL, and reads again sooner (at most every
// DiscoveryRetry) when asked about a kind it has not seen.
type DiscoveryKinds struct {
	client ResourceDiscovery
	now    func() time.Time

	mu sync.Mutex
	// kinds holds every served kind and whether it has /scale.
	kinds map[schema.GroupKind]bool
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
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if !d.loaded || now.Sub(d.loadedAt) >= DiscoveryTTL {
		if err := d.load(ctx, now); err != nil && !d.loaded {
			return KindInfo{}, err
		}
	}
	if scalable, ok := d.kinds[gk]; ok {
		return KindInfo{Served: true, Scalable: scalable}, nil
	}
	// Not seen: maybe installed since the last read.
	if err := d.load(ctx, now); err != nil {
		return KindInfo{}, err
	}
	if scalable, ok := d.kinds[gk]; ok {
		return KindInfo{Served: true, Scalable: scalable}, nil
	}
	if err := d.failedGroups[gk.Group]; err != nil {
		return KindInfo{}, fmt.Errorf("discovery of group %q failed: %w", gk.Group, err)
	}
	return KindInfo{}, nil
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
// it has a /scale subresource.
func kindsOf(lists []*metav1.APIResourceList) map[schema.GroupKind]bool {
	kinds := map[schema.GroupKind]bool{}
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
					kinds[gk] = false
				}
			}
		}
		for _, r := range list.APIResources {
			resource, sub, ok := strings.Cut(r.Name, "/")
			if !ok || sub != "scale" {
				continue
			}
			if kind, ok := resources[resource]; ok {
				kinds[schema.GroupKind{Group: gv.Group, Kind: kind}] = true
			}
		}
	}
	return kinds
}
