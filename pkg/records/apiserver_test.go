package records

import (
	"errors"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// configMapServer answers a fake clientset's ConfigMap requests as the API
// server does where the stores depend on it, which the fake's tracker does
// not: every write gives a new resourceVersion; an update or a delete
// carrying an older one is refused with 409 Conflict; a dry-run create is
// checked and not stored; a namespace that does not exist refuses every
// write (404).
type configMapServer struct {
	mu         sync.Mutex
	version    int
	namespaces sets.Set[string]
	objs       map[types.NamespacedName]*corev1.ConfigMap
}

var configMapsResource = schema.GroupResource{Resource: "configmaps"}

// serveConfigMaps installs a configMapServer on kube holding objs, with the
// namespaces that exist.
func serveConfigMaps(kube *kubefake.Clientset, namespaces []string, objs ...*corev1.ConfigMap) *configMapServer {
	s := &configMapServer{namespaces: sets.New(namespaces...), objs: map[types.NamespacedName]*corev1.ConfigMap{}}
	for _, cm := range objs {
		s.store(cm.DeepCopy())
	}
	kube.PrependReactor("*", "configmaps", s.react)
	return s
}

func (s *configMapServer) store(cm *corev1.ConfigMap) *corev1.ConfigMap {
	s.version++
	cm.ResourceVersion = strconv.Itoa(s.version)
	s.objs[types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}] = cm
	return cm.DeepCopy()
}

func (s *configMapServer) react(action clienttesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := action.GetNamespace()
	switch action.GetVerb() {
	case "get":
		a := action.(clienttesting.GetAction)
		cm, ok := s.objs[types.NamespacedName{Namespace: ns, Name: a.GetName()}]
		if !ok {
			return true, nil, apierrors.NewNotFound(configMapsResource, a.GetName())
		}
		return true, cm.DeepCopy(), nil
	case "list":
		a := action.(clienttesting.ListAction)
		selector := a.GetListRestrictions().Labels
		if selector == nil {
			selector = labels.Everything()
		}
		list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.version)}}
		for key, cm := range s.objs {
			if key.Namespace == ns && selector.Matches(labels.Set(cm.Labels)) {
				list.Items = append(list.Items, *cm.DeepCopy())
			}
		}
		return true, list, nil
	case "create":
		a := action.(clienttesting.CreateActionImpl)
		cm := a.GetObject().(*corev1.ConfigMap).DeepCopy()
		cm.Namespace = ns
		if !s.namespaces.Has(ns) {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ns)
		}
		if _, ok := s.objs[types.NamespacedName{Namespace: ns, Name: cm.Name}]; ok {
			return true, nil, apierrors.NewAlreadyExists(configMapsResource, cm.Name)
		}
		if len(a.CreateOptions.DryRun) > 0 {
			return true, cm, nil
		}
		return true, s.store(cm), nil
	case "update":
		a := action.(clienttesting.UpdateActionImpl)
		cm := a.GetObject().(*corev1.ConfigMap).DeepCopy()
		cm.Namespace = ns
		old, ok := s.objs[types.NamespacedName{Namespace: ns, Name: cm.Name}]
		if !ok {
			return true, nil, apierrors.NewNotFound(configMapsResource, cm.Name)
		}
		if cm.ResourceVersion != "" && cm.ResourceVersion != old.ResourceVersion {
			return true, nil, apierrors.NewConflict(configMapsResource, cm.Name, errModified)
		}
		return true, s.store(cm), nil
	case "delete":
		a := action.(clienttesting.DeleteActionImpl)
		key := types.NamespacedName{Namespace: ns, Name: a.GetName()}
		old, ok := s.objs[key]
		if !ok {
			return true, nil, apierrors.NewNotFound(configMapsResource, a.GetName())
		}
		if p := a.DeleteOptions.Preconditions; p != nil && p.ResourceVersion != nil && *p.ResourceVersion != old.ResourceVersion {
			return true, nil, apierrors.NewConflict(configMapsResource, a.GetName(), errModified)
		}
		delete(s.objs, key)
		return true, nil, nil
	}
	return false, nil, nil
}

var errModified = errors.New("the object has been modified; please apply your changes to the latest version and try again")

// dryRun tells whether a is a create with dryRun: the check of Load.
func dryRun(a clienttesting.Action) bool {
	c, ok := a.(clienttesting.CreateActionImpl)
	return ok && len(c.CreateOptions.DryRun) > 0
}
