package target

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Defaults of the ReadBudget of NewClusterResolver.
const (
	// DefaultProcessReads is how many reads tenants' objects may cause at
	// once in the whole process.
	DefaultProcessReads = 16
	// DefaultNamespaceReads is how many of them the objects of one
	// namespace may cause at once.
	DefaultNamespaceReads = 2
)

// ErrNamespaceBusy is returned, wrapped, when a namespace already has as
// many reads in flight as its share of the ReadBudget allows. It is not an
// answer about any object: retry later.
var ErrNamespaceBusy = errors.New("the namespace's share of API reads is in use")

// ReadBudget bounds the API reads that objects tenants write cause: the
// owner walk's metadata reads, and the /scale reads of upstream's target
// and controller resolution for custom resources. A namespace has at most
// perNamespace reads in flight, the process at most process. The namespace's
// share is taken at once or not at all: a namespace whose share is in use
// gets ErrNamespaceBusy, so that its pods wait in their own retries, not in
// a line that others' pods stand in too. The process's share is waited for,
// first come first served, until the caller's context ends; since each
// namespace waits with at most perNamespace reads, one namespace never
// holds more than that share of the line either. Safe for concurrent use.
type ReadBudget struct {
	process      *semaphore.Weighted
	perNamespace int

	mu    sync.Mutex
	inUse map[string]int
}

// NewReadBudget returns a budget of process reads at once, perNamespace of
// them for one namespace. Values below 1 are taken as 1.
func NewReadBudget(process, perNamespace int) *ReadBudget {
	return &ReadBudget{process: semaphore.NewWeighted(int64(max(process, 1))), perNamespace: max(perNamespace, 1), inUse: map[string]int{}}
}

// Acquire takes one read of namespace's share and of the process's. The
// caller reads, then calls release (more than once is harmless).
func (b *ReadBudget) Acquire(ctx context.Context, namespace string) (release func(), err error) {
	b.mu.Lock()
	if n := b.inUse[namespace]; n >= b.perNamespace {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: namespace %q has %d reads in flight", ErrNamespaceBusy, namespace, n)
	}
	b.inUse[namespace]++
	b.mu.Unlock()
	if err := b.process.Acquire(ctx, 1); err != nil {
		b.leave(namespace)
		return nil, fmt.Errorf("waiting for the process's share of API reads: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			b.process.Release(1)
			b.leave(namespace)
		})
	}, nil
}

func (b *ReadBudget) leave(namespace string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inUse[namespace] <= 1 {
		delete(b.inUse, namespace)
		return
	}
	b.inUse[namespace]--
}

// InFlight returns the reads in flight of namespace.
func (b *ReadBudget) InFlight(namespace string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse[namespace]
}
