package updater

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// deliveringPods is the pod informer as the controller sees it, with one
// more thing for tests: it knows which version of a pod every handler the
// controller registered has been handed. An informer writes its store
// before it notifies its handlers, so a test that waits for the lister
// only may go on while the controller's handler has yet to enqueue.
type deliveringPods struct {
	coreinformers.PodInformer
	informer *deliveringInformer
}

func newDeliveringPods(pods coreinformers.PodInformer) *deliveringPods {
	return &deliveringPods{PodInformer: pods, informer: &deliveringInformer{SharedIndexInformer: pods.Informer()}}
}

func (p *deliveringPods) Informer() cache.SharedIndexInformer { return p.informer }

// delivered reports whether every handler has been handed resourceVersion
// of the object under key.
func (p *deliveringPods) delivered(key, resourceVersion string) bool {
	i := p.informer
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, seen := range i.seen {
		if seen[key] != resourceVersion {
			return false
		}
	}
	return len(i.seen) > 0
}

type deliveringInformer struct {
	cache.SharedIndexInformer
	mu   sync.Mutex
	seen []map[string]string // per handler: key → last version handed over
}

func (i *deliveringInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	n := len(i.seen)
	i.seen = append(i.seen, map[string]string{})
	i.mu.Unlock()
	return i.SharedIndexInformer.AddEventHandler(&marking{inner: h, mark: func(obj any) { i.mark(n, obj) }})
}

// mark notes obj's version as handed to handler n, after the handler ran.
func (i *deliveringInformer) mark(n int, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	i.mu.Lock()
	i.seen[n][key] = m.GetResourceVersion()
	i.mu.Unlock()
}

type marking struct {
	inner cache.ResourceEventHandler
	mark  func(obj any)
}

func (m *marking) OnAdd(obj any, initial bool) { m.inner.OnAdd(obj, initial); m.mark(obj) }
func (m *marking) OnUpdate(old, obj any)       { m.inner.OnUpdate(old, obj); m.mark(obj) }
func (m *marking) OnDelete(obj any)            { m.inner.OnDelete(obj); m.mark(obj) }
