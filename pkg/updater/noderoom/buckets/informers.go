package buckets

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Informers watch the buckets' ConfigMaps, each by its name (a field
// selector): RBAC grants list and watch on them by name only, and the
// other ConfigMaps of the namespace (the records) are not cached.
type Informers struct {
	namespace string
	informers map[string]cache.SharedIndexInformer
}

// NewInformers returns the informers of the named ConfigMaps of namespace.
// A client that cannot stream lists (a fake) says so, and the informers
// then list; otherwise they stream the list as a watch, and only the
// watch's filter sees the objects.
func NewInformers(kube kubernetes.Interface, namespace string, names []string) *Informers {
	i := &Informers{namespace: namespace, informers: make(map[string]cache.SharedIndexInformer, len(names))}
	configMaps := kube.CoreV1().ConfigMaps(namespace)
	for _, name := range names {
		selector := fields.OneTermEqualSelector("metadata.name", name).String()
		lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = selector
				list, err := configMaps.List(ctx, o)
				if err != nil {
					return nil, err
				}
				// Whatever the server did with the selector, only the
				// bucket is kept.
				kept := list.Items[:0]
				for _, cm := range list.Items {
					if cm.Name == name {
						kept = append(kept, cm)
					}
				}
				list.Items = kept
				return list, nil
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = selector
				w, err := configMaps.Watch(ctx, o)
				if err != nil {
					return nil, err
				}
				return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
					if e.Type == watch.Bookmark || e.Type == watch.Error {
						return e, true
					}
					cm, ok := e.Object.(*corev1.ConfigMap)
					return e, ok && cm.Name == name
				}), nil
			},
		}, kube)
		i.informers[name] = cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	}
	return i
}

// Get returns the cached bucket of that name.
func (i *Informers) Get(name string) (*corev1.ConfigMap, bool) {
	inf, ok := i.informers[name]
	if !ok {
		return nil, false
	}
	obj, ok, err := inf.GetStore().GetByKey(i.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	cm, ok := obj.(*corev1.ConfigMap)
	return cm, ok
}

// OnChange calls fn with every change of a bucket: old nil for one added,
// obj nil for one deleted.
func (i *Informers) OnChange(fn func(old, obj *corev1.ConfigMap)) error {
	for name, inf := range i.informers {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if cm, ok := obj.(*corev1.ConfigMap); ok {
					fn(nil, cm)
				}
			},
			UpdateFunc: func(oldObj, obj any) {
				old, okOld := oldObj.(*corev1.ConfigMap)
				cm, ok := obj.(*corev1.ConfigMap)
				if okOld && ok {
					fn(old, cm)
				}
			},
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				if cm, ok := obj.(*corev1.ConfigMap); ok {
					fn(cm, nil)
				}
			},
		}); err != nil {
			return fmt.Errorf("adding the handler of the node room bucket %s: %w", name, err)
		}
	}
	return nil
}

// Run runs the informers until ctx is done.
func (i *Informers) Run(ctx context.Context) {
	for _, inf := range i.informers {
		go inf.RunWithContext(ctx)
	}
}

// HasSynced tells whether every bucket has been listed.
func (i *Informers) HasSynced() bool {
	for _, inf := range i.informers {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

var _ Cache = (*Informers)(nil)
