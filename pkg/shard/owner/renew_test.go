package owner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRenewInterval(t *testing.T) {
	for _, c := range []struct {
		lease, renew, retry, want time.Duration
	}{
		{15 * time.Second, 10 * time.Second, 2 * time.Second, 3 * time.Second},
		{60 * time.Second, 40 * time.Second, 4 * time.Second, 16 * time.Second},
		{12 * time.Second, 9 * time.Second, time.Second, 3500 * time.Millisecond},
		// A long renew deadline: a third of the lease duration.
		{30 * time.Second, 28 * time.Second, 2 * time.Second, 10 * time.Second},
		// A retry period above half the renew deadline: every one renews.
		{15 * time.Second, 10 * time.Second, 6 * time.Second, 0},
	} {
		cfg := Config{LeaseDuration: c.lease, RenewDeadline: c.renew, RetryPeriod: c.retry}
		assert.Equal(t, c.want, cfg.RenewInterval(), "%s/%s/%s", c.lease, c.renew, c.retry)
	}
}

// leaseUpdates counts the updates of a Lease the fake API server was sent.
func leaseUpdates(kube interface{ Actions() []clienttesting.Action }, name string) int {
	n := 0
	for _, a := range kube.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetVerb() == "update" && a.GetResource().Resource == "leases" {
			if lease, ok := u.GetObject().(*coordinationv1.Lease); ok && lease.Name == name {
				n++
			}
		}
	}
	return n
}

// client-go's elector renews a held Lease every retry period (2 s); the
// lock sends a renewal once the last write is a renew interval (3 s) old,
// and the fence stays open all along. A renewal that fails is sent again
// at the next retry period, and giving the Lease up is sent at once.
func TestARenewalIsSentOncePerRenewInterval(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	o, kube := newTestOwner(t, 1, clk)
	ctx := context.Background()
	name := ShardLeaseName(leasePrefix, 0)
	lock := freeShardLock(t, o, kube, clk)

	me := resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15,
		AcquireTime: metav1.NewTime(clk.Now()), RenewTime: metav1.NewTime(clk.Now()), LeaderTransitions: 1}
	require.NoError(t, lock.Update(ctx, me), "taking the Lease")
	require.Equal(t, 1, leaseUpdates(kube, name))

	// 60 s of renewals every 2 s: sent at 4 s, 8 s, ... 60 s.
	for range 30 {
		clk.Step(2 * time.Second)
		me.RenewTime = metav1.NewTime(clk.Now())
		require.NoError(t, lock.Update(ctx, me))
		require.Equal(t, []int{0}, o.Held(), "the fence closed between renewals at %s", clk.Now().Format(time.TimeOnly))
	}
	assert.Equal(t, 1+15, leaseUpdates(kube, name), "renewals sent")
	lease, err := kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, lease.Spec.RenewTime.Time.Equal(clk.Now()), "the last renewal sent: %s", lease.Spec.RenewTime)

	// A renewal due and refused: the next retry period sends it again.
	var refuse atomic.Bool
	refuse.Store(true)
	kube.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if refuse.Swap(false) {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	clk.Step(4 * time.Second)
	me.RenewTime = metav1.NewTime(clk.Now())
	require.Error(t, lock.Update(ctx, me))
	clk.Step(2 * time.Second)
	me.RenewTime = metav1.NewTime(clk.Now())
	require.NoError(t, lock.Update(ctx, me))
	assert.Equal(t, 1+15+2, leaseUpdates(kube, name), "the renewal after a refused one was not sent")

	// Giving it up a second later: sent, and the fence is closed.
	clk.Step(time.Second)
	require.NoError(t, lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, LeaderTransitions: 1}))
	assert.Equal(t, 1+15+2+1, leaseUpdates(kube, name), "giving the Lease up was not sent")
	assert.Empty(t, o.Held())
}
