package admission

import "sync"

// inflight bounds the requests one endpoint handles at once, and the share
// of them one namespace may hold. A slot is taken before the body is read
// (the bound is on memory); the namespace, known once the review is
// decoded, then takes its share or is refused at once, so that the
// requests of one namespace, however slow, never hold more than their
// share of the endpoint.
type inflight struct {
	slots        chan struct{}
	perNamespace int

	mu          sync.Mutex
	byNamespace map[string]int
}

func newInflight(size, perNamespace int) *inflight {
	return &inflight{slots: make(chan struct{}, size), perNamespace: min(perNamespace, size), byNamespace: map[string]int{}}
}

// enter takes a slot, or reports that none is free.
func (p *inflight) enter() bool {
	select {
	case p.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (p *inflight) leave() { <-p.slots }

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
