package shard

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Selection is what a replica's informers of namespaced objects keep: the
// objects of the namespaces of some spans of a layout.
//
// Each list and watch asks the API server for them with the spans'
// shardSelector. A server that serves sharded list and watch (the
// ShardedListAndWatch gate) sends only them and says so: the list carries
// metadata.shardInfo echoing the selector. A server without it ignores the
// parameter (an unknown query parameter, or the gate off) and sends every
// object, with no shardInfo. Whatever the server did, every object listed or
// watched is kept only if its namespace is in the spans, before it enters
// the cache: the API servers of one cluster may differ while they are
// upgraded, and a watch says nothing of what it applied. So the memory
// saving holds everywhere, and the watch traffic is saved where the server
// filters.
type Selection struct {
	layout   Layout
	spans    []Span
	selector string
	observe  Observer
}

// Observer is told what the API server did with a selection's selector.
type Observer interface {
	// Listed is told, at each list of resource, whether the API server
	// applied the selector (shardInfo echoed it). A list streamed as a
	// watch carries no shardInfo and is not told.
	Listed(resource string, serverSide bool)
	// Dropped is told how many objects of resource the API server sent
	// that the selection does not keep: none where it applies the
	// selector.
	Dropped(resource string, n int)
}

// NewSelection returns the selection of spans of l; obs may be nil.
func NewSelection(l Layout, spans []Span, obs Observer) (*Selection, error) {
	if len(spans) == 0 {
		return nil, fmt.Errorf("a selection needs at least one span")
	}
	for _, s := range spans {
		if s.From < 0 || s.To > l.n || s.From >= s.To {
			return nil, fmt.Errorf("span %s is not a run of the %d shards", s, l.n)
		}
	}
	return &Selection{layout: l, spans: spans, selector: l.SelectorOf(spans), observe: obs}, nil
}

// Selector returns the shardSelector sent with every list and watch.
func (s *Selection) Selector() string { return s.selector }

// Has tells whether the namespace is in the selection.
func (s *Selection) Has(namespace string) bool {
	i := s.layout.Of(namespace)
	for _, sp := range s.spans {
		if i >= sp.From && i < sp.To {
			return true
		}
	}
	return false
}

// ListFunc lists objects of one resource (a typed client's List).
type ListFunc func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)

// WatchFunc watches objects of one resource (a typed client's Watch).
type WatchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

// ListWatch returns the list and watch of resource through list and watch,
// with the selection's shardSelector, keeping only the objects of its
// namespaces. client is the clientset list and watch go through: a client
// that cannot stream lists (a fake) says so, and the reflector then lists;
// otherwise it streams the list as a watch (sendInitialEvents), and only the
// watch's filter sees the objects.
func (s *Selection) ListWatch(resource string, client any, list ListFunc, w WatchFunc) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.ShardSelector = s.selector
			obj, err := list(ctx, opts)
			if err != nil {
				return nil, err
			}
			return s.filterList(resource, obj)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.ShardSelector = s.selector
			wi, err := w(ctx, opts)
			if err != nil {
				return nil, err
			}
			return watch.Filter(wi, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Bookmark || e.Type == watch.Error {
					return e, true
				}
				keep := s.keeps(e.Object)
				if !keep && s.observe != nil {
					s.observe.Dropped(resource, 1)
				}
				return e, keep
			}), nil
		},
	}, client)
}

// keeps tells whether obj's namespace is in the selection; an object
// without metadata is not kept.
func (s *Selection) keeps(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	return s.Has(m.GetNamespace())
}

// filterList keeps the items of a list in the selection, and tells the
// observer whether the server applied the selector.
func (s *Selection) filterList(resource string, obj runtime.Object) (runtime.Object, error) {
	lm, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the list of %s: %w", resource, err)
	}
	serverSide := false
	if sl, ok := lm.(metav1.ShardedListInterface); ok {
		info := sl.GetShardInfo()
		serverSide = info != nil && info.Selector == s.selector
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, fmt.Errorf("reading the items of %s: %w", resource, err)
	}
	kept := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		if s.keeps(item) {
			kept = append(kept, item)
		}
	}
	if s.observe != nil {
		s.observe.Listed(resource, serverSide)
		if dropped := len(items) - len(kept); dropped > 0 {
			s.observe.Dropped(resource, dropped)
		}
	}
	if len(kept) == len(items) {
		return obj, nil
	}
	// What remains to list counts objects of other shards.
	lm.SetRemainingItemCount(nil)
	if err := meta.SetList(obj, kept); err != nil {
		return nil, fmt.Errorf("keeping the items of %s in the shards: %w", resource, err)
	}
	return obj, nil
}
