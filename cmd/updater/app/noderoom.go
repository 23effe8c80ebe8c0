package app

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom/buckets"
)

// errBucketMissing says that a node room bucket does not exist and the
// updater may not create it: the chart ships them, empty, with
// --shards above 1.
var errBucketMissing = errors.New("a node room bucket does not exist and the updater may not create it")

// newNodeRoom returns this replica's reservations of node room through the
// API (pkg/updater/noderoom/buckets) and the informers of their buckets,
// once the buckets are checked: nil for a dry run, which sends nothing.
// A reservation lasts at most as long as a hold of the in-process ledger
// (noderoom.MaxHold), or --restart-reservation-timeout when shorter.
func newNodeRoom(ctx context.Context, b *base, identity string) (*buckets.Reservations, *buckets.Informers, error) {
	o := b.o
	if o.DryRun {
		return nil, nil, nil
	}
	names := buckets.Names(o.ShardLeasePrefix, o.NodeRoomBuckets)
	for _, name := range names {
		if err := ensureBucket(ctx, b.kube.CoreV1(), o.RecordsNamespace, name, b.recordsOwner); err != nil {
			return nil, nil, err
		}
	}
	metrics, err := buckets.NewMetrics(b.registry)
	if err != nil {
		return nil, nil, fmt.Errorf("registering metrics: %w", err)
	}
	informers := buckets.NewInformers(b.kube, o.RecordsNamespace, names)
	room, err := buckets.New(buckets.Config{
		API: b.kube.CoreV1().ConfigMaps(o.RecordsNamespace), Cache: informers,
		Namespace: o.RecordsNamespace, Prefix: o.ShardLeasePrefix, Buckets: o.NodeRoomBuckets, Identity: identity,
		TTL: min(noderoom.MaxHold, o.RestartReservationTimeout), Metrics: metrics,
	})
	if err != nil {
		return nil, nil, err
	}
	if err := informers.OnChange(room.Changed); err != nil {
		return nil, nil, err
	}
	return room, informers, nil
}

// ensureBucket checks, at start, that a node room bucket exists, and
// creates it (empty, as the chart ships it, owned by the --records-owner
// Lease when there is one) when it does not and RBAC allows it. A bucket
// that is missing and cannot be created, or cannot be read, is an error:
// the updater does not start. Other errors (the API server not reachable)
// are logged: a reservation reads the bucket again.
func ensureBucket(ctx context.Context, configMaps corev1client.ConfigMapsGetter, namespace, name string, owner *metav1.OwnerReference) error {
	logger := klog.FromContext(ctx)
	_, err := configMaps.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading the node room bucket %s/%s (grant get, update, list and watch on it, by name): %w", namespace, name, err)
	case !apierrors.IsNotFound(err):
		logger.Error(err, "Cannot check the node room bucket yet", "configMap", klog.KRef(namespace, name))
		return nil
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	_, err = configMaps.ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case err == nil:
		logger.Info("Created the node room bucket, which the manifests did not ship", "configMap", klog.KRef(namespace, name))
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	case refusedCreate(err):
		return fmt.Errorf("%w: ConfigMap %s/%s (apply the manifests again, which ship it empty with --shards above 1, "+
			"or grant create on configmaps in %s): %w", errBucketMissing, namespace, name, namespace, err)
	default:
		logger.Error(err, "Cannot create the node room bucket yet", "configMap", klog.KRef(namespace, name))
		return nil
	}
}
