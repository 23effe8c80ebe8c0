package records

import (
	"context"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

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

// merge holds, for owner, what another writer's value of owner's records
// (theirs) holds that this store does not, given base, what this store
// last read or wrote of that value: a record of a UID not held is taken
// unless base had it as recent (then this store forgot it since, on
// purpose), and a record of a UID held is taken when it is newer than the
// one held. It returns the records taken.
func (s *InMemoryStore) merge(owner Owner, theirs, base map[types.UID]*Record) map[types.UID]*Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	taken := map[types.UID]*Record{}
	for uid, r := range theirs {
		if held, ok := s.records[uid]; ok {
			if held.owner.id() != owner.id() || !r.RecordedAt.After(held.rec.RecordedAt) {
				continue
			}
		} else if b, ok := base[uid]; ok && !r.RecordedAt.After(b.RecordedAt) {
			continue
		}
		s.set(uid, entry{owner: owner, rec: r})
		taken[uid] = r
	}
	return taken
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
