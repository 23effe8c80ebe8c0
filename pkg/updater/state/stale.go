package state

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// The one cache-lag rule, for pods and Jobs alike: after a write, the cached
// object predates it until its update event arrives; deciding on it would
// write again.

// staleVersion tells which cached versions of an object predate a write the
// updater made.
type staleVersion struct {
	// cached is the version the cache held when the write was decided.
	cached string
	// sent is the version the write produced, when the API server said.
	// Resource versions are comparable integers (KEP-5504): any cached
	// version below sent predates the write, the one decided on as well as
	// an older one a lagging watch still holds.
	sent  string
	since time.Time
}

// predates reports whether a cached object at version predates the write.
func (s *staleVersion) predates(version string) bool {
	if s.sent != "" {
		if c, err := resourceversion.CompareResourceVersion(version, s.sent); err == nil {
			return c < 0
		}
	}
	// Not comparable: only the version the cache held is known to be stale.
	return version == s.cached
}

// MaxCacheLag is how long an object whose cached version predates a write
// waits for its update event; then it is read from the API server (pods) or
// the cache is trusted again (Jobs, whose writes carry their
// resourceVersion).
const MaxCacheLag = time.Minute

// AwaitUpdate remembers that a write made at "at", decided while the cache
// held the object at resourceVersion cached, made resourceVersion sent (""
// when the API server did not say). The object must be tracked.
func (t *Tracker[S]) AwaitUpdate(uid types.UID, cached, sent string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[uid]; ok {
		e.stale = &staleVersion{cached: cached, sent: sent, since: at}
	}
}

// CacheLag reports whether the cached object, at resourceVersion version,
// predates the write AwaitUpdate was told of (behind), and forgets what it
// was told once the cache holds a version that does not. overdue tells that
// the update event has not come for MaxCacheLag or more.
func (t *Tracker[S]) CacheLag(uid types.UID, version string, now time.Time) (behind, overdue bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[uid]
	if !ok || e.stale == nil {
		return false, false
	}
	if !e.stale.predates(version) {
		e.stale = nil
		return false, false
	}
	return true, now.Sub(e.stale.since) >= MaxCacheLag
}
