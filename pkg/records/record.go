// Package records remembers resize attempts that cannot succeed, keyed by
// pod UID, so that the same infeasible resize is not sent again and again.
// The same store remembers, keyed by Job UID, the recommendations a suspended
// Job's pod template could not be given (KindJobRejected, KindJobUnsupported).
//
// A record holds the values that were attempted: what was patched (kubelet
// reported Infeasible), what the API server refused (403 with a NodeCapacity
// cause), or what validation forbids (422, or a change known to be impossible
// in place). The rules deciding whether a new target may be tried against a
// record follow AEP-8818.
//
// Records survive a restart of the updater and a change of leader:
// ConfigMapStore writes the records of a VPA's pods into a ConfigMap of the
// updater's namespace (compact.go) and reads them all back before the first
// decision. VPAStore, which kept them in an annotation on the VPA
// (annotation.go), is what earlier versions used; ConfigMapStore moves its
// records.
package records

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Kind says why an attempt was recorded.
type Kind string

const (
	// KindInfeasible: the resize was accepted and the kubelet then marked it
	// PodResizePending with reason Infeasible.
	KindInfeasible Kind = "Infeasible"
	// KindNodeCapacity: the API server refused the resize with HTTP 403 and a
	// NodeCapacity cause (Kubernetes 1.36+).
	KindNodeCapacity Kind = "NodeCapacity"
	// KindInvalid: the change cannot be done in place (rejected by
	// validation, or known beforehand to be impossible).
	KindInvalid Kind = "Invalid"
	// KindJobRejected: the API server refused to change the resources of a
	// suspended Job's pod template (422 Invalid, 403 Forbidden, 400): the
	// MutablePodResourcesForSuspendedJobs gate is off, or an admission
	// policy or validation forbids the values. Keyed by Job UID.
	KindJobRejected Kind = "JobRejected"
	// KindJobUnsupported: not sent, because the API server's version cannot
	// change a Job's pod template at all (Kubernetes 1.34 and earlier). Keyed
	// by Job UID.
	KindJobUnsupported Kind = "JobUnsupported"

	// Memory records (kept apart from the kinds above, in a store of their
	// own) hold, per container, a memory limit that must not be lowered to,
	// or below: Attempted names only those limits.

	// KindMemoryLimitRefused: the kubelet refused to lower the memory limits
	// below the memory in use (PodResizeInProgress, reason Error, "cannot
	// decrease memory limits").
	KindMemoryLimitRefused Kind = "MemoryLimitRefused"
	// KindMemoryLimitUnsafe: the updater kept the memory limits because the
	// memory in use, plus the margin, reached the recommended ones.
	KindMemoryLimitUnsafe Kind = "MemoryLimitUnsafe"

	// Safety records (a store of their own, StoreSafety) keep what the
	// watch after a resize must not forget across a restart or a change of
	// leader (docs/safety-after-resize.md). Attempted holds values a resize
	// lowered, as lowered; From, where set, what they were before.

	// KindCanary: the pod is a canary of its VPA's decrease: its resize
	// lowered From to Attempted. RecordedAt is when its watch began (the
	// resize seen completed); zero while the resize is under way. Keyed by
	// the pod's UID.
	KindCanary Kind = "Canary"
	// KindRevert: harm was seen after the pod's resize lowered From to
	// Attempted; the pod is resized back to From, and the record goes once
	// that resize is accepted. Message says what harm. Keyed by the pod's
	// UID.
	KindRevert Kind = "Revert"
	// KindHarmHold: harm was seen after a resize of one of the VPA's pods
	// lowered values to Attempted: no pod of the VPA is lowered to them, or
	// below, until the recommendation rises above them or the hold expires
	// (--harm-hold after RecordedAt). Message says what harm. Keyed by the
	// VPA's own UID.
	KindHarmHold Kind = "HarmHold"
	// KindWatch: values a resize of the pod lowered are still watched
	// (Watch, watch.go); a canary's record keeps its Watch too. Keyed by
	// the pod's UID.
	KindWatch Kind = "Watch"
)

// Record is one remembered attempt.
type Record struct {
	Kind       Kind
	Attempted  resources.Resources
	Message    string
	RecordedAt time.Time
	// Generation is the metadata.generation of the Job a Job record was
	// taken on: a record of an older generation no longer holds (the Job's
	// spec changed since). Zero for pod records.
	Generation int64
	// From is what the values of Attempted were before the resize that
	// lowered them (KindCanary, KindRevert, KindWatch); nil for the other
	// kinds.
	From resources.Resources
	// Watch is the watch of the pod's lowered values (KindWatch,
	// KindCanary); nil for the other kinds, and for a canary's record
	// written by a version that kept none.
	Watch *Watch
}

// ContainerMemoryLimit returns the memory limit the record holds for a
// container. A nil record holds none.
func (r *Record) ContainerMemoryLimit(container string) (resource.Quantity, bool) {
	if r == nil {
		return resource.Quantity{}, false
	}
	q, ok := r.Attempted[container].Limits[corev1.ResourceMemory]
	return q, ok
}

// Verdict is the outcome of comparing a new target with a record.
type Verdict int

const (
	// Same: the target is what was attempted. Skip the pod.
	Same Verdict = iota
	// Lower: at least one value is lower than attempted (for KindInvalid:
	// the target differs). Clear the record and try.
	Lower
	// NotLower: every value is greater than or equal to what was attempted
	// and one is greater. It would fail again: skip the pod, keep the record.
	NotLower
)

// isCapacity tells whether a kind says that the values did not fit: then
// only a lower value is worth another attempt.
func (k Kind) isCapacity() bool {
	return k == KindInfeasible || k == KindNodeCapacity
}

func (v Verdict) String() string {
	switch v {
	case Same:
		return "Same"
	case Lower:
		return "Lower"
	default:
		return "NotLower"
	}
}

// Compare tells whether target may be tried given this record.
//
// For capacity outcomes (KindInfeasible, KindNodeCapacity) a target is only
// worth trying when it asks for less of something. For the other kinds
// (KindInvalid and the Job kinds) any different target is worth trying,
// since validity does not grow with size.
func (r *Record) Compare(target resources.Resources) Verdict {
	equal, lower := true, false
	visit := func(container string, list string, name corev1.ResourceName, attempted, now *resource.Quantity) {
		switch {
		case attempted == nil && now == nil:
		case attempted == nil || now == nil:
			equal = false
			if now == nil {
				lower = true // a value no longer asked for is less than any value
			}
		default:
			if c := now.Cmp(*attempted); c != 0 {
				equal = false
				if c < 0 {
					lower = true
				}
			}
		}
	}
	resources.ForEachValue(r.Attempted, target, visit)
	switch {
	case equal:
		return Same
	case !r.Kind.isCapacity() || lower:
		return Lower
	default:
		return NotLower
	}
}

// Owner is the VPA a pod belongs to. A durable store keeps a pod's record on
// its VPA, so that the record lives and dies with the VPA.
type Owner struct {
	Namespace string
	Name      string
	UID       types.UID
}

// Key is "namespace/name".
func (o Owner) Key() string { return o.Namespace + "/" + o.Name }

// id identifies the VPA records are held for: its UID, or the key of an
// Owner that has none (fakes). A new VPA of the same name is another VPA:
// it never sees the records of the one before.
func (o Owner) id() string {
	if o.UID != "" {
		return string(o.UID)
	}
	return o.Key()
}

// Store holds records by pod UID, each for the VPA it was recorded under.
// Implementations are safe for concurrent use. InMemoryStore keeps them in
// memory only; ConfigMapStore and VPAStore also write them, so that they
// survive a restart and a change of leader.
type Store interface {
	// Get returns the record of a pod, if any, whatever VPA it is held
	// for: for reports and tests. Decisions use GetFor.
	Get(uid types.UID) (*Record, bool)
	// Of returns the records held for owner, by UID: its pods' and Jobs',
	// and for the safety records its own (KindHarmHold). Whether each pod
	// is still owner's is told by GetFor, at its sync.
	Of(owner Owner) map[types.UID]*Record
	// GetFor returns the record of a pod held for owner, the VPA the pod
	// belongs to now. A record held for another VPA is not believed: that
	// VPA does not own the pod (a record read from a value someone else
	// may have written, or a pod that moved), so the record is forgotten
	// and not returned. This is how a loaded record's owner is checked, at
	// the pod's first sync, with the VPA the sync resolves anyway.
	GetFor(owner Owner, uid types.UID) (*Record, bool)
	// Put stores or replaces the record of a pod whose VPA is owner.
	Put(owner Owner, uid types.UID, r *Record)
	// Update replaces, in one step, the record of a pod (whatever VPA it
	// is held for) with what next makes of it: nil forgets it, the record
	// itself keeps it, another is held for owner (a zero owner keeps the
	// record's own, and puts none where there is none). next must not
	// call the store.
	Update(owner Owner, uid types.UID, next func(cur *Record, ok bool) *Record)
	// Delete forgets a pod's record; it reports whether there was one.
	Delete(uid types.UID) bool
	// Retain forgets every record whose pod is not live and returns the UIDs
	// it forgot.
	Retain(live func(types.UID) bool) []types.UID
	// ForgetOwner forgets the records held for a VPA that is gone and
	// returns how many it forgot.
	ForgetOwner(owner Owner) int
	// WriteError is nil while the records held for owner are kept durably
	// (or there are none, or the store keeps nothing durably); otherwise
	// the error of the last write of them, which is being retried: until
	// one succeeds they are held in memory only.
	WriteError(owner Owner) error
	// Len is the number of records held.
	Len() int
	// Load reads the records kept durably, replacing what is held. It is
	// called once, before any decision is taken.
	Load(ctx context.Context) error
	// Loaded is nil once the last Load has succeeded; before a Load has
	// ended, and while one runs, an error saying so; after a failed Load,
	// its error. Readiness reflects it.
	Loaded() error
	// Run writes changed records durably until ctx is cancelled. It returns
	// at once when the store keeps nothing durably.
	Run(ctx context.Context)
}

type entry struct {
	owner Owner
	rec   *Record
}

// InMemoryStore is a Store kept in memory.
type InMemoryStore struct {
	mu      sync.RWMutex
	records map[types.UID]entry
	// counts holds the number of records held for each VPA, by Owner.id.
	counts map[string]int
}

var _ Store = (*InMemoryStore)(nil)

// NewInMemoryStore returns an empty in-memory store.
func NewInMemoryStore() *InMemoryStore {
	return &InMemoryStore{records: map[types.UID]entry{}, counts: map[string]int{}}
}

// set holds e for uid and keeps counts; s.mu is held.
func (s *InMemoryStore) set(uid types.UID, e entry) {
	if old, ok := s.records[uid]; ok {
		s.uncount(old.owner.id())
	}
	s.records[uid] = e
	s.counts[e.owner.id()]++
}

// remove forgets the record of uid and keeps counts; s.mu is held.
func (s *InMemoryStore) remove(uid types.UID) (entry, bool) {
	e, ok := s.records[uid]
	if ok {
		delete(s.records, uid)
		s.uncount(e.owner.id())
	}
	return e, ok
}

func (s *InMemoryStore) uncount(id string) {
	if s.counts[id]--; s.counts[id] <= 0 {
		delete(s.counts, id)
	}
}

// count is the number of records held for the VPA of that id.
func (s *InMemoryStore) count(id string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.counts[id]
}

// Get implements Store.
func (s *InMemoryStore) Get(uid types.UID) (*Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.records[uid]
	return e.rec, ok
}

// GetFor implements Store.
func (s *InMemoryStore) GetFor(owner Owner, uid types.UID) (*Record, bool) {
	r, ok, _ := s.getFor(owner, uid)
	return r, ok
}

// getFor also returns the VPA a record it forgot was held for.
func (s *InMemoryStore) getFor(owner Owner, uid types.UID) (*Record, bool, *Owner) {
	s.mu.RLock()
	e, ok := s.records[uid]
	s.mu.RUnlock()
	switch {
	case !ok:
		return nil, false, nil
	case e.owner.id() == owner.id():
		return e.rec, true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Forgotten only if it is still the record looked at: one put
	// meanwhile (for owner, by a worker) stays.
	if now, ok := s.records[uid]; !ok || now.rec != e.rec {
		if ok && now.owner.id() == owner.id() {
			return now.rec, true, nil
		}
		return nil, false, nil
	}
	s.remove(uid)
	// A copy: taking e's own address would move every lookup's e to the
	// heap.
	other := e.owner
	return nil, false, &other
}

// Put implements Store.
func (s *InMemoryStore) Put(owner Owner, uid types.UID, r *Record) {
	s.put(owner, uid, r)
}

// put stores a record and returns the owner the pod's previous record had,
// if any.
func (s *InMemoryStore) put(owner Owner, uid types.UID, r *Record) (previous Owner, had bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.records[uid]
	s.set(uid, entry{owner: owner, rec: r})
	return old.owner, had
}

// Delete implements Store.
func (s *InMemoryStore) Delete(uid types.UID) bool {
	_, ok := s.delete(uid)
	return ok
}

func (s *InMemoryStore) delete(uid types.UID) (owner Owner, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.remove(uid)
	return e.owner, ok
}

// Retain implements Store.
func (s *InMemoryStore) Retain(live func(types.UID) bool) []types.UID {
	forgotten, _ := s.retain(live)
	return forgotten
}

// retain also returns the ids of the owners of the forgotten records.
func (s *InMemoryStore) retain(live func(types.UID) bool) ([]types.UID, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var forgotten []types.UID
	owners := map[string]bool{}
	for uid, e := range s.records {
		if !live(uid) {
			s.remove(uid)
			forgotten = append(forgotten, uid)
			owners[e.owner.id()] = true
		}
	}
	sort.Slice(forgotten, func(i, j int) bool { return forgotten[i] < forgotten[j] })
	ids := make([]string, 0, len(owners))
	for id := range owners {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return forgotten, ids
}

// ForgetOwner implements Store.
func (s *InMemoryStore) ForgetOwner(owner Owner) int {
	return s.forget(owner.id())
}

// forget forgets the records held for the VPA of that id.
func (s *InMemoryStore) forget(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for uid, e := range s.records {
		if e.owner.id() == id {
			s.remove(uid)
			n++
		}
	}
	return n
}

// Of implements Store.
func (s *InMemoryStore) Of(owner Owner) map[types.UID]*Record { return s.byOwner(owner.id()) }

// byOwner returns the records held for the VPA of that id.
func (s *InMemoryStore) byOwner(id string) map[types.UID]*Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[types.UID]*Record{}
	for uid, e := range s.records {
		if e.owner.id() == id {
			out[uid] = e.rec
		}
	}
	return out
}

// adopt holds, for owner, the records of UIDs not held that were made after
// after, and returns how many.
func (s *InMemoryStore) adopt(owner Owner, records map[types.UID]*Record, after time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for uid, r := range records {
		if _, held := s.records[uid]; held || !r.RecordedAt.After(after) {
			continue
		}
		s.set(uid, entry{owner: owner, rec: r})
		n++
	}
	return n
}

// replace swaps in a whole new set of records.
func (s *InMemoryStore) replace(records map[types.UID]entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = records
	s.counts = map[string]int{}
	for _, e := range records {
		s.counts[e.owner.id()]++
	}
}

// Len implements Store.
func (s *InMemoryStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.records)
}

// WriteError implements Store: a InMemoryStore writes nothing.
func (s *InMemoryStore) WriteError(Owner) error { return nil }

// Load implements Store: a InMemoryStore keeps nothing durably.
func (s *InMemoryStore) Load(context.Context) error { return nil }

// Loaded implements Store: a InMemoryStore has nothing to load.
func (s *InMemoryStore) Loaded() error { return nil }

// Run implements Store: a InMemoryStore writes nothing.
func (s *InMemoryStore) Run(context.Context) {}
