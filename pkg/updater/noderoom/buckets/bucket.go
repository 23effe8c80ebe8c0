package buckets

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The reasons an entry is removed (MetricRemoved).
const (
	// removedReleased: its resize was refused, failed, not sent, or its
	// pod went.
	removedReleased = "released"
	// removedShown: the node view shows its resize.
	removedShown = "shown"
	// removedExpired: it outlived the TTL, as this replica saw it.
	removedExpired = "expired"
	// removedInvalid: it is not a reservation this package writes, or the
	// bucket was over its bounds.
	removedInvalid = "invalid"
)

// bucket is what this replica holds of one bucket.
type bucket struct {
	index int
	name  string
	// write makes this replica's reads, decisions and writes of the
	// bucket one at a time: its own writes never conflict with each
	// other, only with other replicas'.
	write sync.Mutex

	mu sync.Mutex
	// known is the answer to this replica's last write while the cache
	// still shows a version it wrote over.
	known *written
	// seen holds, per key, the entry's text and when this replica first
	// saw it: an entry expires a TTL after that, on this replica's clock.
	// No time another replica wrote is trusted, and clocks are never
	// compared.
	seen map[string]sighting
	// overSince is when this replica first saw the bucket over its
	// bounds; zero while it is within them.
	overSince time.Time
	// mine holds this replica's reservations in the bucket, by pod UID.
	mine map[types.UID]own
	// pending holds the reservations of this replica to remove, by key.
	pending map[string]removal
}

// written is the last of this replica's writes of a bucket that the API
// server accepted, in a row: the versions they were written over (each
// write's answer being the next one's base), and the last answer.
type written struct {
	bases map[string]bool
	obj   *corev1.ConfigMap
}

// maxBases bounds the versions a row of writes remembers.
const maxBases = 64

// sighting is an entry's text and when this replica first saw it.
type sighting struct {
	value string
	at    time.Time
}

// own is a reservation this replica wrote.
type own struct {
	key, value string
	requests   corev1.ResourceList
}

// removal is a reservation of this replica to remove once due, if its
// entry still holds value.
type removal struct {
	value  string
	due    time.Time
	reason string
}

func newBucket(index int, name string) *bucket {
	return &bucket{index: index, name: name, seen: map[string]sighting{}, mine: map[types.UID]own{}, pending: map[string]removal{}}
}

// view is a bucket as read, its entries told apart.
type view struct {
	cm *corev1.ConfigMap
	// live are the valid entries that have not expired, by key; expires
	// tells when each does.
	live    map[string]entry
	expires map[string]time.Time
	// drop holds the keys to remove at the next write, with the reason.
	drop map[string]string
	// over: the bucket is over its bounds, why, and until when it is
	// left as it is (then cleared).
	over      bool
	overWhy   string
	overUntil time.Time
}

// view sorts the entries of cm (nil: an empty bucket) as seen at now,
// noting the entries first seen.
func (b *bucket) view(cm *corev1.ConfigMap, now time.Time, ttl time.Duration) view {
	v := view{cm: cm, live: map[string]entry{}, expires: map[string]time.Time{}, drop: map[string]string{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cm == nil {
		clear(b.seen)
		return v
	}
	if ok, why := within(cm.Data, cm.BinaryData); !ok {
		// Nothing in it is parsed, and no replica writes into it: once
		// no reservation written before it went over can be live, it is
		// cleared.
		if b.overSince.IsZero() {
			b.overSince = now
		}
		v.over, v.overWhy, v.overUntil = true, why, b.overSince.Add(ttl)
		if !now.Before(v.overUntil) {
			for k := range cm.Data {
				v.drop[k] = removedInvalid
			}
			for k := range cm.BinaryData {
				v.drop[k] = removedInvalid
			}
		}
		clear(b.seen)
		return v
	}
	b.overSince = time.Time{}
	present := make(map[string]bool, len(cm.Data))
	for k, value := range cm.Data {
		e, err := parse(k, value)
		if err != nil {
			v.drop[k] = removedInvalid
			continue
		}
		present[k] = true
		s, ok := b.seen[k]
		if !ok || s.value != value {
			s = sighting{value: value, at: now}
			b.seen[k] = s
		}
		expires := s.at.Add(ttl)
		if !now.Before(expires) {
			v.drop[k] = removedExpired
			continue
		}
		v.live[k] = e
		v.expires[k] = expires
	}
	for k := range cm.BinaryData {
		v.drop[k] = removedInvalid
	}
	for k := range b.seen {
		if !present[k] {
			delete(b.seen, k)
		}
	}
	return v
}

// heldOn returns the live entries for node, by pod UID, but the one of
// except.
func (v view) heldOn(node string, except types.UID) map[types.UID]corev1.ResourceList {
	out := map[types.UID]corev1.ResourceList{}
	for k, e := range v.live {
		if e.node == node && types.UID(k) != except {
			out[types.UID(k)] = e.requests
		}
	}
	return out
}

// earliest returns when the first of the live entries for node (all, for
// "") but the one of except expires; zero without one.
func (v view) earliest(node string, except types.UID) time.Time {
	var first time.Time
	for k, e := range v.live {
		if (node != "" && e.node != node) || types.UID(k) == except {
			continue
		}
		if at := v.expires[k]; first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// remember keeps the answer to a write accepted over version base.
func (b *bucket) remember(base string, obj *corev1.ConfigMap) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if k := b.known; k != nil && k.obj.ResourceVersion == base && len(k.bases) < maxBases {
		k.bases[base] = true
		k.obj = obj
		return
	}
	b.known = &written{bases: map[string]bool{base: true}, obj: obj}
}

// read returns the bucket as this replica last knows it: the answer to its
// own last write while the cache shows a version it wrote over, else the
// cache's, else (no cache, or not in it) the API server's. What it returns may be stale: a write
// over it then conflicts, and the bucket is read again from the API
// server.
func (r *Reservations) read(ctx context.Context, b *bucket) (*corev1.ConfigMap, error) {
	if r.cache == nil {
		return r.get(ctx, b)
	}
	cached, ok := r.cache.Get(b.name)
	b.mu.Lock()
	if k := b.known; k != nil {
		if !ok || k.bases[cached.ResourceVersion] {
			// The cache has not caught up with this replica's writes.
			b.mu.Unlock()
			return k.obj, nil
		}
		// It shows the last of them, or another replica's write.
		b.known = nil
	}
	b.mu.Unlock()
	if ok {
		return cached, nil
	}
	return r.get(ctx, b)
}

// get reads the bucket from the API server.
func (r *Reservations) get(ctx context.Context, b *bucket) (*corev1.ConfigMap, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	cm, err := r.api.Get(ctx, b.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the node room bucket %s/%s: %w", r.namespace, b.name, err)
	}
	return cm, nil
}

// update writes the bucket with the version it was read at, and keeps the
// answer.
func (r *Reservations) update(ctx context.Context, b *bucket, cm *corev1.ConfigMap) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	updated, err := r.api.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	b.remember(cm.ResourceVersion, updated)
	return nil
}

// withData returns a copy of cm holding data, and no binary data, at cm's
// version.
func withData(cm *corev1.ConfigMap, data map[string]string) *corev1.ConfigMap {
	out := cm.DeepCopy()
	out.Data = data
	out.BinaryData = nil
	return out
}
