package app

import (
	"context"
	"strings"
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
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testlease"
)

// testLease is the election of the tests. The leader holds the Lease for a
// minute and renews it every 100 ms for up to 30 s before it gives up, so
// that no load on the machine running the tests makes it lose the Lease
// (elections that should end do so by a release, a takeover or a deletion,
// never by a renewal missed in real time); a standby takes the Lease over
// as soon as the leader releases it (ReleaseOnCancel), not when it expires.
func testLease() componentbaseconfig.LeaderElectionConfiguration {
	return componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:       true,
		LeaseDuration:     metav1.Duration{Duration: time.Minute},
		RenewDeadline:     metav1.Duration{Duration: 30 * time.Second},
		RetryPeriod:       metav1.Duration{Duration: 100 * time.Millisecond},
		ResourceLock:      "leases",
		ResourceName:      "vpa-inplace-updater",
		ResourceNamespace: "vpa-inplace-system",
	}
}

// leaseClientset is a fake clientset holding objs whose Leases are
// versioned as the API server versions them: of candidates writing the
// same Lease, one wins and the others get a Conflict.
func leaseClientset(objs ...runtime.Object) *kubefake.Clientset {
	kube := kubefake.NewClientset(objs...)
	testlease.Versioned(kube)
	return kube
}

// standby returns kube for a candidate, and a channel closed once that
// candidate has read the Lease held by the candidate whose POD_NAME is
// holder twice: it found the Lease held, did not take it, and tried again.
func standby(kube kubernetes.Interface, holder string) (kubernetes.Interface, <-chan struct{}) {
	var reads atomic.Int32
	waited := make(chan struct{})
	return testlease.Wrap(kube, testlease.Hooks{Read: func(l *coordinationv1.Lease) {
		if strings.HasPrefix(ptr.Deref(l.Spec.HolderIdentity, ""), holder+"_") && reads.Add(1) == 2 {
			close(waited)
		}
	}}), waited
}

// waitFor returns what ch receives, failing t if nothing comes within a
// minute.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		require.FailNow(t, "timed out waiting: "+what)
		var zero T
		return zero
	}
}

func TestOnlyOneReplicaWorksAndTheOtherTakesOver(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := leaseClientset()
	var working atomic.Int32
	var overlapped atomic.Bool
	started := make(chan struct{}, 2)
	work := func(c context.Context) error {
		if working.Add(1) > 1 {
			overlapped.Store(true)
		}
		started <- struct{}{}
		<-c.Done()
		working.Add(-1)
		return nil
	}

	ctxA, stopA := context.WithCancel(ctx)
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	t.Setenv("POD_NAME", "a")
	go func() { doneA <- runAsLeader(ctxA, kube, testLease(), nil, work) }()
	waitFor(t, started, "a leads")
	t.Setenv("POD_NAME", "b")
	kubeB, bWaited := standby(kube, "a")
	go func() { doneB <- runAsLeader(ctxB, kubeB, testLease(), nil, work) }()
	waitFor(t, bWaited, "b finds the Lease held by a")
	assert.Equal(t, int32(1), working.Load(), "the second replica waits")

	stopA() // shutdown releases the lease
	require.NoError(t, waitFor(t, doneA, "a returns"))
	waitFor(t, started, "the other replica takes over")
	assert.Equal(t, int32(1), working.Load())
	assert.False(t, overlapped.Load(), "never two at once")
	stopB()
	require.NoError(t, waitFor(t, doneB, "b returns"))
}

func TestLosingTheLeaseStopsWorkAndReturns(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := leaseClientset()
	// Once another replica holds the Lease, this one tries to renew it for
	// RenewDeadline before it gives up.
	cfg := testLease()
	cfg.RenewDeadline = metav1.Duration{Duration: 2 * time.Second}
	leader, _ := newTestLeaderGauge(t)
	var stopped atomic.Bool
	leading := make(chan float64, 1)
	done := make(chan error, 1)
	go func() {
		done <- runAsLeader(ctx, kube, cfg, leader, func(c context.Context) error {
			leading <- testutil.ToFloat64(leader.gauge)
			<-c.Done()
			stopped.Store(true)
			return nil
		})
	}()
	assert.Equal(t, 1.0, waitFor(t, leading, "leading"), "the gauge while leading")

	// Another replica takes the Lease over, from the version it read: this
	// replica's renewals, from the version before, are refused from then on.
	leases := kube.CoordinationV1().Leases("vpa-inplace-system")
	require.Eventually(t, func() bool {
		lease, err := leases.Get(ctx, "vpa-inplace-updater", metav1.GetOptions{})
		require.NoError(t, err)
		lease.Spec = coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("someone-else"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
			RenewTime:            &metav1.MicroTime{Time: time.Now().Add(time.Hour)},
		}
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false // renewed between the get and the update
		}
		require.NoError(t, err)
		return true
	}, time.Minute, 10*time.Millisecond, "taken over")

	err := waitFor(t, done, "losing the lease stops the updater")
	assert.ErrorIs(t, err, errLeadershipLost)
	assert.True(t, stopped.Load(), "work was stopped")
	assert.Equal(t, 0.0, testutil.ToFloat64(leader.gauge), "no longer the leader")
	lease, err := leases.Get(ctx, "vpa-inplace-updater", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "someone-else", ptr.Deref(lease.Spec.HolderIdentity, ""), "the Lease is left to the new leader")
}

// A leader whose renewals stall for longer than its lease (a process
// stopped, or starved on a busy node) finds, once they go through, that
// the standby has taken the Lease over: its renewal, from the version it
// last wrote, is refused with a Conflict, and it stops and returns
// errLeadershipLost instead of taking the Lease back. On a fake clientset
// that applies every update, both replicas lead from then on.
func TestAStalledLeaderDoesNotTakeTheLeaseBack(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := leaseClientset()
	// The standby takes the Lease once it has not changed for a's
	// LeaseDuration; a, stalled longer than its RenewDeadline, gives up
	// once its renewal returns. b holds the Lease as the other tests do.
	cfgA := testLease()
	cfgA.LeaseDuration = metav1.Duration{Duration: 3 * time.Second}
	cfgA.RenewDeadline = metav1.Duration{Duration: 2 * time.Second}
	gaugeA, _ := newTestLeaderGauge(t)
	gaugeB, _ := newTestLeaderGauge(t)
	working := make(chan string, 2)
	work := func(name string) func(context.Context) error {
		return func(c context.Context) error {
			working <- name
			<-c.Done()
			return nil
		}
	}
	// a's renewals are held from when hold is set until release is closed.
	var hold atomic.Bool
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	kubeA := testlease.Wrap(kube, testlease.Hooks{Update: func(*coordinationv1.Lease) {
		if hold.Load() {
			select {
			case held <- struct{}{}:
			default:
			}
			<-release
		}
	}})
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	t.Setenv("POD_NAME", "a")
	go func() { doneA <- runAsLeader(ctx, kubeA, cfgA, gaugeA, work("a")) }()
	require.Equal(t, "a", waitFor(t, working, "a leads"))
	hold.Store(true)
	waitFor(t, held, "a renews, and stalls")

	t.Setenv("POD_NAME", "b")
	go func() { doneB <- runAsLeader(ctxB, kube, testLease(), gaugeB, work("b")) }()
	require.Equal(t, "b", waitFor(t, working, "b takes the Lease a does not renew"))

	close(release)
	require.ErrorIs(t, waitFor(t, doneA, "a, its renewal refused, stops"), errLeadershipLost)
	assert.Equal(t, 0.0, testutil.ToFloat64(gaugeA.gauge), "a no longer leads")
	assert.Equal(t, 1.0, testutil.ToFloat64(gaugeB.gauge), "b leads")
	select {
	case err := <-doneB:
		t.Fatalf("b stopped leading: %v", err)
	default:
	}
	lease, err := kube.CoordinationV1().Leases("vpa-inplace-system").Get(ctx, "vpa-inplace-updater", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Regexp(t, "^b_", ptr.Deref(lease.Spec.HolderIdentity, ""), "the Lease stays b's")

	stopB()
	require.NoError(t, waitFor(t, doneB, "b returns"))
}
