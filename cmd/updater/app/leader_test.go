package app

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

func fastLease() componentbaseconfig.LeaderElectionConfiguration {
	return componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:       true,
		LeaseDuration:     metav1.Duration{Duration: time.Second},
		RenewDeadline:     metav1.Duration{Duration: 500 * time.Millisecond},
		RetryPeriod:       metav1.Duration{Duration: 100 * time.Millisecond},
		ResourceLock:      "leases",
		ResourceName:      "vpa-inplace-updater",
		ResourceNamespace: "vpa-inplace-system",
	}
}

func TestOnlyOneReplicaWorksAndTheOtherTakesOver(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewClientset()
	var working atomic.Int32
	var maxWorking atomic.Int32
	work := func(c context.Context) error {
		n := working.Add(1)
		if n > maxWorking.Load() {
			maxWorking.Store(n)
		}
		<-c.Done()
		working.Add(-1)
		return nil
	}

	ctxA, stopA := context.WithCancel(ctx)
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	t.Setenv("POD_NAME", "a")
	go func() { doneA <- runAsLeader(ctxA, kube, fastLease(), nil, work) }()
	require.Eventually(t, func() bool { return working.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	go func() { doneB <- runAsLeader(ctxB, kube, fastLease(), nil, work) }()
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, int32(1), working.Load(), "the second replica waits")

	stopA() // shutdown releases the lease
	require.NoError(t, <-doneA)
	require.Eventually(t, func() bool { return working.Load() == 1 }, 10*time.Second, 10*time.Millisecond, "the other replica takes over")
	assert.Equal(t, int32(1), maxWorking.Load(), "never two at once")
	stopB()
	require.NoError(t, <-doneB)
}

func TestLosingTheLeaseStopsWorkAndReturns(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewClientset()
	// Once another replica holds the lease, the API server refuses updates
	// based on the old resourceVersion; the fake does not, so refuse them
	// here as the API server would.
	var takenOver atomic.Bool
	kube.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !takenOver.Load() {
			return false, nil, nil
		}
		if u, ok := a.(clienttesting.UpdateAction); ok {
			if l, ok := u.GetObject().(*coordinationv1.Lease); ok && ptr.Deref(l.Spec.HolderIdentity, "") == "someone-else" {
				return false, nil, nil
			}
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "vpa-inplace-updater", errors.New("the object has been modified"))
	})
	var stopped atomic.Bool
	done := make(chan error, 1)
	leader, _ := newTestLeaderGauge(t)
	go func() {
		done <- runAsLeader(ctx, kube, fastLease(), leader, func(c context.Context) error {
			<-c.Done()
			stopped.Store(true)
			return nil
		})
	}()
	require.Eventually(t, func() bool {
		_, err := kube.CoordinationV1().Leases("vpa-inplace-system").Get(ctx, "vpa-inplace-updater", metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)

	require.Eventually(t, func() bool { return testutil.ToFloat64(leader.gauge) == 1 }, 10*time.Second, 10*time.Millisecond, "leading")

	// Another replica takes the lease over. From now on this replica's
	// updates are refused: set before the takeover, or a renewal slipping in
	// between would overwrite it.
	takenOver.Store(true)
	lease, err := kube.CoordinationV1().Leases("vpa-inplace-system").Get(ctx, "vpa-inplace-updater", metav1.GetOptions{})
	require.NoError(t, err)
	lease.Spec = coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To("someone-else"),
		LeaseDurationSeconds: ptr.To[int32](3600),
		AcquireTime:          &metav1.MicroTime{Time: time.Now()},
		RenewTime:            &metav1.MicroTime{Time: time.Now().Add(time.Hour)},
	}
	_, err = kube.CoordinationV1().Leases("vpa-inplace-system").Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)

	select {
	case err := <-done:
		assert.True(t, errors.Is(err, errLeadershipLost), "got %v", err)
		assert.True(t, stopped.Load(), "work was stopped")
		assert.Equal(t, 0.0, testutil.ToFloat64(leader.gauge), "no longer the leader")
	case <-time.After(20 * time.Second):
		t.Fatal("losing the lease did not stop the updater")
	}
}
