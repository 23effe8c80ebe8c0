// Package testlease makes a fake clientset keep Leases as the API server
// does where a leader election depends on it, so that an election run on it
// has one winner:
//
//	kube := kubefake.NewClientset(objs...)
//	testlease.Versioned(kube)
//
// The fake's object tracker keeps whatever resourceVersion a client sends
// and applies every update: two candidates that read the same free Lease
// both win it, and a leader renewing from its last copy overwrites the
// replica that took the Lease over. Versioned gives every Lease written a
// new resourceVersion and refuses an update carrying another one with 409
// Conflict.
//
// Wrap gives one candidate its own view of the clientset, with hooks on
// its Lease reads and updates: a test waits for what a candidate has read,
// or holds its renewals, instead of waiting for a time.
package testlease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	clienttesting "k8s.io/client-go/testing"
)

var (
	leases = coordinationv1.SchemeGroupVersion.WithResource("leases")
	kind   = coordinationv1.SchemeGroupVersion.WithKind("Lease")
)

// errModified is the API server's message of a Conflict.
var errModified = errors.New("the object has been modified; please apply your changes to the latest version and try again")

// versions numbers the Leases written through one clientset.
type versions struct {
	// mu makes the check of an update and its write one step (the fake
	// also runs one request at a time; this does not depend on it).
	mu      sync.Mutex
	last    int
	tracker clienttesting.ObjectTracker
}

// Versioned makes kube version its Leases: a create stores the Lease at a
// new resourceVersion (and is refused, 400, when the request carries one);
// an update is refused with 409 Conflict unless it carries the
// resourceVersion stored, with 422 Invalid when it carries none (Leases do
// not allow unconditional updates), and stores the Lease at a new one.
// Leases kube already holds get a resourceVersion. An update of a Lease
// that does not exist stays 404 Not Found, as the tracker answers it.
// Patches and deletes go to the tracker as before.
//
// Call it before prepending reactors that must see Lease requests first
// (refused creates, injected errors): the reactor prepended last runs
// first.
func Versioned(kube *kubefake.Clientset) {
	v := &versions{tracker: kube.Tracker()}
	v.mu.Lock()
	defer v.mu.Unlock()
	list, err := v.tracker.List(leases, kind, "")
	if err != nil {
		panic(fmt.Sprintf("listing the fake's Leases: %v", err))
	}
	for _, lease := range list.(*coordinationv1.LeaseList).Items {
		if err := v.tracker.Update(leases, v.stamp(&lease), lease.Namespace); err != nil {
			panic(fmt.Sprintf("versioning the fake's Lease %s/%s: %v", lease.Namespace, lease.Name, err))
		}
	}
	kube.PrependReactor("create", "leases", v.create)
	kube.PrependReactor("update", "leases", v.update)
}

// stamp gives lease the next resourceVersion.
func (v *versions) stamp(lease *coordinationv1.Lease) *coordinationv1.Lease {
	v.last++
	lease.ResourceVersion = strconv.Itoa(v.last)
	return lease
}

func (v *versions) create(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.CreateAction)
	if !ok {
		return false, nil, nil
	}
	lease, ok := a.GetObject().(*coordinationv1.Lease)
	if !ok {
		return false, nil, nil
	}
	if lease.ResourceVersion != "" {
		return true, nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	lease = lease.DeepCopy()
	if lease.Namespace == "" {
		lease.Namespace = a.GetNamespace()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.tracker.Create(leases, v.stamp(lease), a.GetNamespace()); err != nil {
		return true, nil, err
	}
	return true, lease.DeepCopy(), nil
}

func (v *versions) update(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.UpdateAction)
	if !ok {
		return false, nil, nil
	}
	lease, ok := a.GetObject().(*coordinationv1.Lease)
	if !ok {
		return false, nil, nil
	}
	lease = lease.DeepCopy()
	if lease.Namespace == "" {
		lease.Namespace = a.GetNamespace()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	stored, err := v.tracker.Get(leases, a.GetNamespace(), lease.Name)
	if err != nil {
		return true, nil, err
	}
	switch current := stored.(*coordinationv1.Lease).ResourceVersion; lease.ResourceVersion {
	case current:
	case "":
		return true, nil, apierrors.NewInvalid(kind.GroupKind(), lease.Name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), lease.ResourceVersion, "must be specified for an update"),
		})
	default:
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: leases.Group, Resource: leases.Resource}, lease.Name,
			fmt.Errorf("resourceVersion %s, not %s: %w", current, lease.ResourceVersion, errModified))
	}
	if err := v.tracker.Update(leases, v.stamp(lease), a.GetNamespace()); err != nil {
		return true, nil, err
	}
	return true, lease.DeepCopy(), nil
}

// Hooks are called on a candidate's Lease requests (see Wrap). Either may
// be nil.
type Hooks struct {
	// Read is called with every Lease read (a get that succeeds), before
	// the caller has it: a test learns that a candidate has read the
	// Lease, and whom it found holding it, without waiting for a time.
	Read func(*coordinationv1.Lease)
	// Update is called with every Lease before its update is sent, and may
	// block: a test holds a candidate's renewals as a stalled process
	// would, on any machine.
	Update func(*coordinationv1.Lease)
}

// Wrap returns kube for one candidate, calling h on its Lease requests.
// The hooks may be called from several goroutines.
func Wrap(kube kubernetes.Interface, h Hooks) kubernetes.Interface {
	return hookedClient{Interface: kube, h: h}
}

type hookedClient struct {
	kubernetes.Interface
	h Hooks
}

func (c hookedClient) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return hookedGroup{CoordinationV1Interface: c.Interface.CoordinationV1(), h: c.h}
}

type hookedGroup struct {
	coordinationv1client.CoordinationV1Interface
	h Hooks
}

func (g hookedGroup) Leases(namespace string) coordinationv1client.LeaseInterface {
	return hookedLeases{LeaseInterface: g.CoordinationV1Interface.Leases(namespace), h: g.h}
}

type hookedLeases struct {
	coordinationv1client.LeaseInterface
	h Hooks
}

func (l hookedLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	lease, err := l.LeaseInterface.Get(ctx, name, opts)
	if err == nil && l.h.Read != nil {
		l.h.Read(lease.DeepCopy())
	}
	return lease, err
}

func (l hookedLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if l.h.Update != nil {
		l.h.Update(lease.DeepCopy())
	}
	return l.LeaseInterface.Update(ctx, lease, opts)
}
