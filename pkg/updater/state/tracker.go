package state

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// Tracker remembers the status of every pod (or every suspended Job) of an
// InPlace VPA, keyed by UID and grouped by VPA. It is safe for concurrent
// use; every method is one atomic step.
type Tracker[S ~string] struct {
	mu      sync.Mutex
	entries map[types.UID]*entry[S]
	byVPA   map[string]sets.Set[types.UID]
	// gone holds the objects deleted lately, and when: a worker that decided
	// on one while it was being deleted must not track it again.
	gone map[types.UID]time.Time
	// targets shares equal targets of resizes under way (sent.go).
	targets      map[string]*sharedTarget
	shareTargets bool
}

type entry[S ~string] struct {
	Status[S]
	// notes hold, per topic, what a once-only event was last sent for in
	// the current state (Once); they go when the state changes.
	notes map[string]string
	// lasting hold what OnceWhileTracked sent, whatever the state.
	lasting map[string]string
	// sent is a resize under way (pods only).
	sent *Sent
	// last is the last resize sent, kept once it completed (pods only): a
	// change that would only undo it is held for a while (resize.Decide).
	last *resize.LastResize
	// stale is kept until the cache has moved past it, whatever became of
	// the write meanwhile.
	stale *staleVersion
}

// GoneFor is how long a deleted object is remembered as deleted: far longer
// than a worker takes on it (UIDs are never reused).
const GoneFor = 10 * time.Minute

// New returns an empty tracker.
func New[S ~string]() *Tracker[S] {
	return &Tracker[S]{entries: map[types.UID]*entry[S]{}, byVPA: map[string]sets.Set[types.UID]{},
		gone: map[types.UID]time.Time{}, targets: map[string]*sharedTarget{}, shareTargets: true}
}

// entryFor returns the object's entry, creating it under vpa. Callers hold
// t.mu.
func (t *Tracker[S]) entryFor(uid types.UID, vpa, name string) *entry[S] {
	e, ok := t.entries[uid]
	if !ok {
		e = &entry[S]{Status: Status[S]{VPA: vpa, Name: name}}
		t.entries[uid] = e
	}
	if e.VPA != vpa {
		t.ungroup(e.VPA, uid)
		e.VPA = vpa
	}
	if t.byVPA[vpa] == nil {
		t.byVPA[vpa] = sets.New[types.UID]()
	}
	t.byVPA[vpa].Insert(uid)
	return e
}

func (t *Tracker[S]) ungroup(vpa string, uid types.UID) {
	if s := t.byVPA[vpa]; s != nil {
		s.Delete(uid)
		if s.Len() == 0 {
			delete(t.byVPA, vpa)
		}
	}
}

// drop forgets an entry. Callers hold t.mu.
func (t *Tracker[S]) drop(uid types.UID, e *entry[S]) {
	t.release(e)
	delete(t.entries, uid)
	t.ungroup(e.VPA, uid)
}

// Set records an object's status. A zero Since keeps the time the object
// entered the state (now when it is new). It returns the VPAs whose summary
// changed. An object deleted lately is not tracked again.
func (t *Tracker[S]) Set(uid types.UID, st Status[S], now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, deleted := t.gone[uid]; deleted {
		return nil
	}
	old, existed := t.entries[uid]
	var before Status[S]
	if existed {
		before = old.Status
	}
	e := t.entryFor(uid, st.VPA, st.Name)
	if st.Since.IsZero() {
		if existed && before.State == st.State && !before.Since.IsZero() {
			st.Since = before.Since
		} else {
			st.Since = now
		}
	}
	if existed && before.Equal(st) {
		return nil
	}
	e.Status = st
	if st.State != before.State {
		e.notes = nil
	}
	if existed && before.VPA != st.VPA {
		return []string{before.VPA, st.VPA}
	}
	return []string{st.VPA}
}

// Forget drops an object and returns the VPA it was counted under.
func (t *Tracker[S]) Forget(uid types.UID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[uid]
	if !ok {
		return "", false
	}
	t.drop(uid, e)
	return e.VPA, true
}

// Deleted forgets a deleted object for good (for GoneFor) and returns the
// VPA it was counted under.
func (t *Tracker[S]) Deleted(uid types.UID, now time.Time) (string, bool) {
	t.mu.Lock()
	t.gone[uid] = now
	t.mu.Unlock()
	return t.Forget(uid)
}

// Retain forgets the objects live says are gone, and the deletions older
// than GoneFor; it returns the VPAs whose objects changed.
func (t *Tracker[S]) Retain(live func(types.UID) bool, now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, at := range t.gone {
		if now.Sub(at) > GoneFor {
			delete(t.gone, uid)
		}
	}
	changed := sets.New[string]()
	for uid, e := range t.entries {
		if !live(uid) {
			t.drop(uid, e)
			changed.Insert(e.VPA)
		}
	}
	return sets.List(changed)
}

// ForgetVPA drops every object counted under a VPA.
func (t *Tracker[S]) ForgetVPA(vpa string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range t.byVPA[vpa] {
		if e, ok := t.entries[uid]; ok {
			t.drop(uid, e)
		}
	}
	delete(t.byVPA, vpa)
}

// Of returns the statuses of a VPA's objects, by name.
func (t *Tracker[S]) Of(vpa string) []Status[S] {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Status[S], 0, t.byVPA[vpa].Len())
	for uid := range t.byVPA[vpa] {
		out = append(out, t.entries[uid].Status)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns an object's status.
func (t *Tracker[S]) Get(uid types.UID) (Status[S], bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[uid]
	if !ok {
		return Status[S]{}, false
	}
	return e.Status, true
}

// Counts counts the objects in each state and tells how long the oldest has
// been in it.
func (t *Tracker[S]) Counts(now time.Time) (map[S]int, map[S]time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	counts := map[S]int{}
	oldest := map[S]time.Duration{}
	for _, e := range t.entries {
		counts[e.State]++
		if age := now.Sub(e.Since); age > oldest[e.State] {
			oldest[e.State] = age
		}
	}
	return counts, oldest
}

// Select returns the statuses match picks.
func (t *Tracker[S]) Select(match func(Status[S]) bool) []Status[S] {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Status[S]
	for _, e := range t.entries {
		if match(e.Status) {
			out = append(out, e.Status)
		}
	}
	return out
}

// Once reports whether the once-only event of topic for value is still to
// be sent for an object in its current state, and marks it sent. What was
// sent is forgotten when the object changes state.
func (t *Tracker[S]) Once(uid types.UID, topic, value string) bool {
	return t.once(uid, func(e *entry[S]) *map[string]string { return &e.notes }, topic, value)
}

// OnceWhileTracked is Once for an event that is about the object rather
// than its state: what was sent is forgotten only with the object.
func (t *Tracker[S]) OnceWhileTracked(uid types.UID, topic, value string) bool {
	return t.once(uid, func(e *entry[S]) *map[string]string { return &e.lasting }, topic, value)
}

// Sent returns the value last sent for topic by OnceWhileTracked for an
// object, if any.
func (t *Tracker[S]) Sent(uid types.UID, topic string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[uid]
	if !ok {
		return "", false
	}
	v, ok := e.lasting[topic]
	return v, ok
}

// once marks value sent for topic in the notes of uid's entry that in
// picks, and tells whether it was not already.
func (t *Tracker[S]) once(uid types.UID, in func(*entry[S]) *map[string]string, topic, value string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[uid]
	if !ok {
		return false
	}
	notes := in(e)
	if last, sent := (*notes)[topic]; sent && last == value {
		return false
	}
	if *notes == nil {
		*notes = map[string]string{}
	}
	(*notes)[topic] = value
	return true
}
