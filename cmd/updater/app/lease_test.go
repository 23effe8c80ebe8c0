package app

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// shippedLease is the Lease as the chart and deploy/ ship it: no spec.
func shippedLease() *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "vpa-inplace-system", Name: "vpa-inplace-updater"}}
}

// refuseLeaseCreates makes the fake API server refuse to create leases, as
// RBAC does with the shipped Role (get and update by name), and counts the
// attempts.
func refuseLeaseCreates(kube *kubefake.Clientset) *atomic.Int32 {
	var creates atomic.Int32
	kube.PrependReactor("create", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		return true, nil, apierrors.NewForbidden(leasesResource, "", errors.New("RBAC: no create"))
	})
	return &creates
}

func TestEnsureLease(t *testing.T) {
	for _, tc := range []struct {
		name       string
		existing   bool
		refuse     bool
		wantErr    error
		wantLeases int
	}{
		{name: "shipped: nothing to do", existing: true, refuse: true, wantLeases: 1},
		{name: "missing, create allowed (older manifests): created", wantLeases: 1},
		{name: "missing, create refused: an error at start", refuse: true, wantErr: errLeaseMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kube := kubefake.NewClientset()
			if tc.existing {
				_, err := kube.CoordinationV1().Leases("vpa-inplace-system").Create(ctx, shippedLease(), metav1.CreateOptions{})
				require.NoError(t, err)
			}
			var creates *atomic.Int32
			if tc.refuse {
				creates = refuseLeaseCreates(kube)
			}
			err := ensureLease(ctx, kube.CoordinationV1(), "vpa-inplace-system", "vpa-inplace-updater")
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.ErrorContains(t, err, "Lease vpa-inplace-system/vpa-inplace-updater")
				assert.Equal(t, int32(1), creates.Load(), "one attempt")
				return
			}
			require.NoError(t, err)
			list, err := kube.CoordinationV1().Leases("vpa-inplace-system").List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			assert.Len(t, list.Items, tc.wantLeases)
		})
	}
	t.Run("not readable: an error at start", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		kube := kubefake.NewClientset()
		kube.PrependReactor("get", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(leasesResource, "vpa-inplace-updater", errors.New("RBAC: no get"))
		})
		err := ensureLease(ctx, kube.CoordinationV1(), "vpa-inplace-system", "vpa-inplace-updater")
		assert.ErrorContains(t, err, "grant get and update")
	})
}

// The Lease the manifests ship has no spec: the first replica takes it.
func TestShippedEmptyLeaseIsTaken(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := leaseClientset(shippedLease())
	creates := refuseLeaseCreates(kube)
	t.Setenv("POD_NAME", "a")
	ctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var worked atomic.Bool
	go func() {
		done <- runAsLeader(ctx, kube, testLease(), nil, func(c context.Context) error {
			worked.Store(true)
			<-c.Done()
			return nil
		})
	}()
	require.Eventually(t, worked.Load, time.Minute, 10*time.Millisecond, "leads")
	lease, err := kube.CoordinationV1().Leases("vpa-inplace-system").Get(ctx, "vpa-inplace-updater", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Regexp(t, "^a_", ptr.Deref(lease.Spec.HolderIdentity, ""))
	assert.Zero(t, creates.Load(), "nothing created")
	stop()
	require.NoError(t, <-done)
}

// A Lease that is missing and cannot be created stops the election with an
// error that says so, after one attempt, instead of an attempt every
// --leader-elect-retry-period for ever: before the leader led (the Lease
// was never there, or was deleted while a standby waited), and when the
// leader's Lease is deleted under it.
func TestMissingLeaseStopsTheElectionWithAnError(t *testing.T) {
	run := func(t *testing.T, kube *kubefake.Clientset, work func(context.Context) error) error {
		t.Helper()
		_, ctx := ktesting.NewTestContext(t)
		done := make(chan error, 1)
		go func() { done <- runAsLeader(ctx, kube, testLease(), nil, work) }()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the election did not stop")
			return nil
		}
	}
	t.Run("never there", func(t *testing.T) {
		kube := leaseClientset()
		creates := refuseLeaseCreates(kube)
		err := run(t, kube, func(context.Context) error {
			t.Error("led without a Lease")
			return nil
		})
		require.ErrorIs(t, err, errLeaseMissing)
		assert.ErrorContains(t, err, "Lease vpa-inplace-system/vpa-inplace-updater")
		assert.LessOrEqual(t, creates.Load(), int32(2), "not tried again and again")
	})
	t.Run("deleted under the leader", func(t *testing.T) {
		kube := leaseClientset(shippedLease())
		creates := refuseLeaseCreates(kube)
		var stopped atomic.Bool
		err := run(t, kube, func(c context.Context) error {
			require.NoError(t, kube.CoordinationV1().Leases("vpa-inplace-system").Delete(c, "vpa-inplace-updater", metav1.DeleteOptions{}))
			<-c.Done()
			stopped.Store(true)
			return nil
		})
		require.ErrorIs(t, err, errLeaseMissing)
		assert.True(t, stopped.Load(), "work was stopped")
		assert.LessOrEqual(t, creates.Load(), int32(2), "not tried again and again")
	})
}

func TestLeaseOwnerReference(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	lease := shippedLease()
	lease.UID = "lease-uid"
	kube := kubefake.NewClientset(lease)
	ref, err := leaseOwnerReference(ctx, kube.CoordinationV1(), "vpa-inplace-system", "vpa-inplace-updater")
	require.NoError(t, err)
	assert.Equal(t, metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "vpa-inplace-updater", UID: "lease-uid"}, *ref)

	_, err = leaseOwnerReference(ctx, kube.CoordinationV1(), "vpa-inplace-system", "other")
	require.ErrorContains(t, err, "--records-owner Lease vpa-inplace-system/other")
	assert.True(t, apierrors.IsNotFound(err))
}
