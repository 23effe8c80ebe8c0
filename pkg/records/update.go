package records

import "k8s.io/apimachinery/pkg/types"

// Update implements Store.
func (s *InMemoryStore) Update(owner Owner, uid types.UID, next func(cur *Record, ok bool) *Record) {
	s.update(owner, uid, next)
}

// update is Update; it returns the VPA the record is now held for when
// one was put, and the VPAs whose records changed.
func (s *InMemoryStore) update(owner Owner, uid types.UID, next func(cur *Record, ok bool) *Record) (put *Owner, changed []Owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.records[uid]
	r := next(e.rec, ok)
	switch {
	case ok && r == e.rec:
		return nil, nil
	case r == nil:
		if !ok {
			return nil, nil
		}
		s.remove(uid)
		return nil, []Owner{e.owner}
	case owner == Owner{}:
		if !ok {
			return nil, nil
		}
		owner = e.owner
	}
	s.set(uid, entry{owner: owner, rec: r})
	changed = []Owner{owner}
	if ok && e.owner.id() != owner.id() {
		changed = append(changed, e.owner)
	}
	return &owner, changed
}

// Update implements Store: the VPAs whose records changed are written.
func (s *durable) Update(owner Owner, uid types.UID, next func(cur *Record, ok bool) *Record) {
	put, changed := s.mem.update(owner, uid, next)
	if put != nil {
		s.mu.Lock()
		s.owners[put.id()] = *put
		s.mu.Unlock()
	}
	for _, o := range changed {
		s.queue.Add(o.id())
	}
}
