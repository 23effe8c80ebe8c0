package records

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
)

// observedQueue is a store's queue that tells when the writes asked for
// are done: every Add is numbered, and each processing of a VPA's records
// notes the last number added when it began (Get) and, when it is over
// (Done: after the write, and after the retry it may have queued), that it
// covered the adds up to there. Tests wait on it instead of sleeping before
// they check what a write did not do.
type observedQueue struct {
	workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	adds    int
	added   map[string]int // by id: the number of its last add
	began   map[string]int // by id: adds numbered when its processing began
	covered map[string]int // by id: the most adds a processing that is over began after
}

// observeWrites puts an observedQueue in s's place: call it before Load
// and Run.
func observeWrites(s *durable) {
	s.queue = &observedQueue{TypedRateLimitingInterface: s.queue,
		added: map[string]int{}, began: map[string]int{}, covered: map[string]int{}}
}

func (q *observedQueue) Add(id string) {
	q.mu.Lock()
	q.adds++
	q.added[id] = q.adds
	q.mu.Unlock()
	q.TypedRateLimitingInterface.Add(id)
}

func (q *observedQueue) Get() (string, bool) {
	id, shutdown := q.TypedRateLimitingInterface.Get()
	q.mu.Lock()
	q.began[id] = q.adds
	q.mu.Unlock()
	return id, shutdown
}

func (q *observedQueue) Done(id string) {
	q.mu.Lock()
	q.covered[id] = max(q.covered[id], q.began[id])
	q.mu.Unlock()
	q.TypedRateLimitingInterface.Done(id)
}

// written tells whether the records of the VPA of id, as they were at its
// last add, have been written (or the write failed, and was queued again
// or not).
func (q *observedQueue) written(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.covered[id] >= q.added[id]
}

// waitWritten waits until the store (started by start or startCM) has
// handled every change of owner's records made before the call: what it
// writes, or leaves alone, for them is done.
func waitWritten(t *testing.T, s *durable, owner Owner) {
	t.Helper()
	q, ok := s.queue.(*observedQueue)
	require.True(t, ok, "the store was not started by the fixture")
	require.Eventually(t, func() bool { return q.written(owner.id()) }, wait, tick, "the writes of %s are done", owner.Key())
}
