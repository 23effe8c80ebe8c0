package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// errLeaseMissing says that the leader election Lease does not exist and
// the updater may not create it. The chart and deploy/ ship the Lease
// (empty) and grant get and update on it by name, not create: an updater
// run with manifests that do not ship it (or after it was deleted) stops
// with this error instead of trying to create it for ever.
var errLeaseMissing = errors.New("the leader election Lease does not exist and the updater may not create it")

// leaseMissing wraps errLeaseMissing with the Lease and what to do.
func leaseMissing(namespace, name string, err error) error {
	return fmt.Errorf("%w: Lease %s/%s (apply the manifests again, which ship it empty, "+
		"or grant create on leases in %s as older manifests did): %w", errLeaseMissing, namespace, name, namespace, err)
}

// refusedCreate tells whether a create was refused because the updater
// may not create there (RBAC) or the namespace does not exist: a retry
// cannot succeed before someone acts.
func refusedCreate(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err)
}

// ensureLease checks, at start, that the leader election Lease exists, and
// creates it (empty, as the manifests ship it) when it does not and RBAC
// allows it, as manifests before the Lease was shipped did. A Lease that
// is missing and cannot be created, or cannot be read, is an error: the
// updater does not start. Other errors (the API server not reachable) are
// logged and left to the election, which retries.
func ensureLease(ctx context.Context, leases coordinationv1client.LeasesGetter, namespace, name string) error {
	logger := klog.FromContext(ctx)
	_, err := leases.Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading the leader election Lease %s/%s (grant get and update on it, by name): %w", namespace, name, err)
	case !apierrors.IsNotFound(err):
		logger.Error(err, "Cannot check the leader election Lease yet; the election tries again", "lease", klog.KRef(namespace, name))
		return nil
	}
	_, err = leases.Leases(namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		logger.Info("Created the leader election Lease, which the manifests did not ship", "lease", klog.KRef(namespace, name))
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	case refusedCreate(err):
		return leaseMissing(namespace, name, err)
	default:
		logger.Error(err, "Cannot create the leader election Lease yet; the election tries again", "lease", klog.KRef(namespace, name))
		return nil
	}
}

// leaseLock is client-go's LeaseLock, which creates the Lease when it finds
// none; the first create refused (RBAC, or no namespace) is kept (Missing)
// and calls stop, so that runAsLeader ends the election with
// errLeaseMissing at once instead of trying again every
// --leader-elect-retry-period.
type leaseLock struct {
	*resourcelock.LeaseLock

	mu      sync.Mutex
	missing error
	stop    func()
}

var _ resourcelock.Interface = (*leaseLock)(nil)

// newLeaseLock returns the lock of lock's Lease; stop is called once, when
// a create is refused.
func newLeaseLock(lock *resourcelock.LeaseLock, stop func()) *leaseLock {
	return &leaseLock{LeaseLock: lock, stop: stop}
}

// Create implements resourcelock.Interface.
func (l *leaseLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Create(ctx, ler)
	if refusedCreate(err) {
		l.mu.Lock()
		first := l.missing == nil
		if first {
			l.missing = leaseMissing(l.LeaseMeta.Namespace, l.LeaseMeta.Name, err)
		}
		l.mu.Unlock()
		if first {
			l.stop()
		}
	}
	return err
}

// Missing returns the error of a refused create, nil if there was none.
func (l *leaseLock) Missing() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.missing
}

// leaseOwnerReference returns the owner reference of the Lease
// namespace/name (--records-owner), read once at start: the records
// ConfigMaps are written owned by it, and deleted by the garbage collector
// when it is deleted. Only its UID is taken; a Lease deleted and made again
// owns the records written after the next start. A Lease that is missing or
// cannot be read is an error: records written with no owner would outlive
// an uninstall.
func leaseOwnerReference(ctx context.Context, leases coordinationv1client.LeasesGetter, namespace, name string) (*metav1.OwnerReference, error) {
	lease, err := leases.Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading --records-owner Lease %s/%s (it must exist, in --records-namespace, and the updater be allowed to get it): %w",
			namespace, name, err)
	}
	return &metav1.OwnerReference{
		APIVersion: coordinationv1.SchemeGroupVersion.String(),
		Kind:       "Lease",
		Name:       lease.Name,
		UID:        lease.UID,
	}, nil
}
