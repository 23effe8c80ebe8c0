package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// slotWait is the longest a request waits for a slot of its endpoint.
const slotWait = time.Second

// inflight bounds the requests one endpoint handles at once, and the share
// of them one namespace may hold. A slot is taken before the body is read
// (the bound is on memory); a request waits for one, first come first
// served, at most slotWait. The namespace, known once the review is
// decoded, then takes its share or is refused at once: the requests of one
// namespace, however slow, never hold more than their share of the
// endpoint, and those refused give their slot back at once, so that a
// request of another namespace waits behind them no longer than they take
// to be refused.
type inflight struct {
	size  int
	slots *semaphore.Weighted
	// wait is the longest a request waits for a slot: slotWait.
	wait time.Duration
	// waiting counts the requests waiting for a slot now.
	waiting      atomic.Int32
	perNamespace int

	mu          sync.Mutex
	byNamespace map[string]int
}

func newInflight(size, perNamespace int) *inflight {
	return &inflight{size: size, slots: semaphore.NewWeighted(int64(size)), wait: slotWait, perNamespace: min(perNamespace, size), byNamespace: map[string]int{}}
}

// enter takes a slot, waiting at most p.wait (and no longer than ctx), or
// reports that none came free.
func (p *inflight) enter(ctx context.Context) bool {
	if p.slots.TryAcquire(1) {
		return true
	}
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, p.wait)
	defer cancel()
	return p.slots.Acquire(ctx, 1) == nil
}

func (p *inflight) leave() { p.slots.Release(1) }

// enterNamespace takes one of ns's share, or reports that the share is in
// use. The check and the take are one step.
func (p *inflight) enterNamespace(ns string) (release func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byNamespace[ns] >= p.perNamespace {
		return nil, false
	}
	p.byNamespace[ns]++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.byNamespace[ns] <= 1 {
			delete(p.byNamespace, ns)
			return
		}
		p.byNamespace[ns]--
	}, true
}
