package owner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testlease"
)

func TestTarget(t *testing.T) {
	three := []Member{{Slot: 4, Identity: "c"}, {Slot: 0, Identity: "a"}, {Slot: 2, Identity: "b"}}
	for _, tc := range []struct {
		name    string
		shards  int
		members []Member
		self    string
		want    int
	}{
		{"alone: every shard", 16, []Member{{0, "a"}}, "a", 16},
		{"not a member: none", 16, three, "z", 0},
		{"no members: none", 16, nil, "a", 0},
		{"16 over 3: the lowest slot takes one more", 16, three, "a", 6},
		{"16 over 3: the next", 16, three, "b", 5},
		{"16 over 3: the last", 16, three, "c", 5},
		{"8 over 3: two take three", 8, three, "b", 3},
		{"8 over 3: the last takes two", 8, three, "c", 2},
		{"4 over 3", 4, three, "c", 1},
		{"a slot seen twice counts once", 4, append(three, Member{Slot: 2, Identity: "b"}), "c", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Target(tc.shards, tc.members, tc.self))
		})
	}
	// The shares add up to the shards, each at most the ceiling.
	for shards := 1; shards <= 20; shards++ {
		for n := 1; n <= shards; n++ {
			var members []Member
			for i := range n {
				members = append(members, Member{Slot: i * 2, Identity: string(rune('a' + i))})
			}
			sum := 0
			for _, m := range members {
				got := Target(shards, members, m.Identity)
				require.LessOrEqual(t, got, (shards+n-1)/n)
				sum += got
			}
			require.Equal(t, shards, sum, "%d shards over %d", shards, n)
		}
	}
}

func TestExtras(t *testing.T) {
	assert.Nil(t, Extras([]int{1, 2}, 2))
	assert.Nil(t, Extras(nil, 0))
	assert.Equal(t, []int{5, 7}, Extras([]int{7, 1, 5, 2}, 2))
	assert.Equal(t, []int{1, 2}, Extras([]int{2, 1}, 0))
}

// newTestOwner returns an Owner of shards shards on a fake API server,
// not running: its fences are driven by hand.
func newTestOwner(t *testing.T, shards int, clk *clocktesting.FakeClock) (*Owner, *kubefake.Clientset) {
	t.Helper()
	layout, err := shard.NewLayout(shards)
	require.NoError(t, err)
	kube := kubefake.NewClientset()
	testlease.Versioned(kube)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(leaseNamespace))
	o, err := New(kube.CoordinationV1(), factory.Coordination().V1().Leases(), Config{
		Namespace: leaseNamespace, Prefix: leasePrefix, Layout: layout, Identity: "me",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		OnChange: func(context.Context, []int) {}, Clock: clk,
	})
	require.NoError(t, err)
	o.ctx = context.Background()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return o, kube
}

func shardRef(k int) leaseRef {
	return leaseRef{kind: kindShard, index: k, name: ShardLeaseName(leasePrefix, k)}
}

func memberRef(k int) leaseRef {
	return leaseRef{kind: kindMember, index: k, name: MemberLeaseName(leasePrefix, k)}
}

// record is this replica's record renewed at renew.
func record(renew time.Time) []byte {
	return recordRaw(resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15,
		AcquireTime: metav1.NewTime(renew), RenewTime: metav1.NewTime(renew)})
}

// Validity runs from the first send of a record as other candidates see
// it: renewals within one second are one record to them (times in whole
// seconds), so a second renewal that second does not extend it.
func TestFenceRunsFromTheFirstSendOfARecord(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 100e6, time.UTC)
	var f fence
	f.wrote(record(t0), 15, t0)
	assert.Equal(t, t0.Add(15*time.Second), f.validUntil)
	later := t0.Add(800 * time.Millisecond) // the same second
	f.wrote(record(later), 15, later)
	assert.Equal(t, t0.Add(15*time.Second), f.validUntil, "a renewal others cannot tell apart extended the fence")
	next := t0.Add(1200 * time.Millisecond)
	f.wrote(record(next), 15, next)
	assert.Equal(t, next.Add(15*time.Second), f.validUntil)
	assert.True(t, f.lets(next.Add(10*time.Second), 5*time.Second))
	assert.False(t, f.lets(next.Add(10*time.Second+time.Millisecond), 5*time.Second), "a write that may outlast the Lease")
}

func TestGuard(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o, _ := newTestOwner(t, 4, clk)
	ns := "team-a"
	k := o.cfg.Layout.Of(ns)

	_, _, err := o.Guard(context.Background(), ns)
	require.ErrorIs(t, err, ErrNotHeld, "a shard never held")

	o.wrote(shardRef(k), record(clk.Now()), 15, clk.Now())
	wctx, done, err := o.Guard(context.Background(), ns)
	require.NoError(t, err)
	deadline, ok := wctx.Deadline()
	require.True(t, ok)
	assert.Equal(t, clk.Now().Add(o.cfg.RequestTimeout()), deadline, "the request must end within the request timeout")
	done()
	assert.Equal(t, []int{k}, o.Held())

	// Renewals stop: the fence closes once the Lease might be taken over
	// before a request ends: lease duration less the request timeout.
	clk.Step(10 * time.Second)
	_, done, err = o.Guard(context.Background(), ns)
	require.NoError(t, err)
	done()
	clk.Step(time.Millisecond)
	_, _, err = o.Guard(context.Background(), ns)
	require.ErrorIs(t, err, ErrNotHeld)
	assert.Empty(t, o.Held())
}

// Giving a shard up waits for the writes let through, after cancelling
// them; no new one is let through meanwhile.
func TestReleaseWaitsForTheWritesInFlight(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o, _ := newTestOwner(t, 1, clk)
	o.wrote(shardRef(0), record(clk.Now()), 15, clk.Now())
	wctx, done, err := o.Guard(context.Background(), "ns")
	require.NoError(t, err)

	quiesced := make(chan struct{})
	go func() {
		o.mu.Lock()
		o.quiesceLocked(o.shards[0])
		o.mu.Unlock()
		close(quiesced)
	}()
	select {
	case <-wctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the write in flight was not cancelled")
	}
	require.Eventually(t, func() bool {
		_, _, err := o.Guard(context.Background(), "ns")
		return errors.Is(err, ErrNotHeld)
	}, 30*time.Second, time.Millisecond)
	select {
	case <-quiesced:
		t.Fatal("gave the shard up before the write in flight was done")
	default:
	}
	done()
	done() // twice is once
	select {
	case <-quiesced:
	case <-time.After(30 * time.Second):
		t.Fatal("giving up did not end once the write was done")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	assert.Zero(t, o.shards[0].inflight)
}

// Many writers for one shard while it is given up: once it is, none is let
// through, and none let through is still in flight.
func TestGuardAndReleaseRace(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o, _ := newTestOwner(t, 1, clk)
	o.wrote(shardRef(0), record(clk.Now()), 15, clk.Now())
	var inFlight, after sync.WaitGroup
	var mu sync.Mutex
	released, lateWrites, live := false, 0, 0
	for range 50 {
		inFlight.Go(func() {
			for range 200 {
				wctx, done, err := o.Guard(context.Background(), "ns")
				if err != nil {
					continue
				}
				mu.Lock()
				if released {
					lateWrites++
				}
				live++
				mu.Unlock()
				select {
				case <-wctx.Done():
				default:
				}
				mu.Lock()
				live--
				mu.Unlock()
				done()
			}
		})
	}
	after.Go(func() {
		o.mu.Lock()
		o.quiesceLocked(o.shards[0])
		o.mu.Unlock()
		mu.Lock()
		released = true
		assert.Zero(t, live, "writes still in flight once the shard was given up")
		mu.Unlock()
	})
	inFlight.Wait()
	after.Wait()
	assert.Zero(t, lateWrites)
}

func TestAdmitKeepsToTheShare(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o, _ := newTestOwner(t, 4, clk)
	_, err := o.admit(shardRef(0), "me")
	require.ErrorIs(t, err, errNotAdmitted, "not a member yet")

	acquiring, err := o.admit(memberRef(1), "me")
	require.NoError(t, err)
	require.True(t, acquiring)
	_, err = o.admit(memberRef(2), "me")
	require.ErrorIs(t, err, errNotAdmitted, "a second slot while taking the first")
	o.wrote(memberRef(1), record(clk.Now()), 15, clk.Now())
	_, err = o.admit(memberRef(2), "me")
	require.ErrorIs(t, err, errNotAdmitted, "a second slot")

	o.mu.Lock()
	o.target = 2
	o.mu.Unlock()
	_, err = o.admit(shardRef(0), "me")
	require.NoError(t, err)
	o.wrote(shardRef(0), record(clk.Now()), 15, clk.Now())
	_, err = o.admit(shardRef(1), "me")
	require.NoError(t, err)
	_, err = o.admit(shardRef(2), "me")
	require.ErrorIs(t, err, errNotAdmitted, "past the share, counting the acquisition under way")
	o.writeFailed(shardRef(1), true)
	_, err = o.admit(shardRef(2), "me")
	require.NoError(t, err, "an acquisition that failed frees its place")

	renewing, err := o.admit(shardRef(0), "me")
	require.NoError(t, err)
	assert.False(t, renewing, "a renewal is no acquisition")

	_, err = o.admit(shardRef(0), "")
	require.NoError(t, err)
	_, _, err = o.Guard(context.Background(), namespaceOf(o, 0))
	require.ErrorIs(t, err, ErrNotHeld, "giving the Lease up closes the fence before the write")

	// A member whose own Lease may have been taken over is no member.
	clk.Step(15 * time.Second)
	_, err = o.admit(shardRef(3), "me")
	require.ErrorIs(t, err, errNotAdmitted)
}

func namespaceOf(o *Owner, k int) string {
	for j := 0; ; j++ {
		if ns := fmt.Sprintf("ns-%d", j); o.cfg.Layout.Of(ns) == k {
			return ns
		}
	}
}

// freeShardLock returns the lock of shard 0's Lease, created empty and
// read, with o a member whose share is that shard.
func freeShardLock(t *testing.T, o *Owner, kube *kubefake.Clientset, clk *clocktesting.FakeClock) *leaseLock {
	t.Helper()
	ctx := context.Background()
	_, err := kube.CoordinationV1().Leases(leaseNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: ShardLeaseName(leasePrefix, 0)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	lock := &leaseLock{o: o, ref: shardRef(0)}
	require.Eventually(t, func() bool { _, _, err := lock.Get(ctx); return err == nil }, 30*time.Second, time.Millisecond)
	o.mu.Lock()
	o.target = 1
	o.mu.Unlock()
	o.wrote(memberRef(0), record(clk.Now()), 15, clk.Now())
	return lock
}

// fixedLeases is a Lease cache that never sees a change.
type fixedLeases struct{ lease *coordinationv1.Lease }

func (f fixedLeases) List(labels.Selector) ([]*coordinationv1.Lease, error) {
	return []*coordinationv1.Lease{f.lease}, nil
}

func (f fixedLeases) Get(name string) (*coordinationv1.Lease, error) {
	if name != f.lease.Name {
		return nil, apierrors.NewNotFound(coordinationv1.Resource("leases"), name)
	}
	return f.lease, nil
}

// After a renewal that failed, client-go's elector gives the Lease up with
// the version it has just read, whoever holds it: the lock writes nothing
// over another replica's record.
func TestLockGivesUpOnlyItsOwnLease(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o, kube := newTestOwner(t, 1, clk)
	ctx := context.Background()
	_, err := kube.CoordinationV1().Leases(leaseNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: ShardLeaseName(leasePrefix, 0)},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](15)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	lock := &leaseLock{o: o, ref: shardRef(0)}
	require.Eventually(t, func() bool {
		r, _, err := lock.Get(ctx)
		return err == nil && r.HolderIdentity == "other"
	}, 30*time.Second, time.Millisecond)
	require.NoError(t, lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}))
	lease, err := kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, ShardLeaseName(leasePrefix, 0), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "other", *lease.Spec.HolderIdentity)
}

// A cache that has not seen this replica's last write yet is not believed:
// the write's own result stands in, so the next write carries the version
// the API server holds; after a conflict the next read asks the API server.
func TestLockReadsPastAStaleCache(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o, kube := newTestOwner(t, 1, clk)
	ctx := context.Background()
	name := ShardLeaseName(leasePrefix, 0)
	lock := freeShardLock(t, o, kube, clk)

	// The cache is frozen at the version read: a lister of a fixed copy.
	stuck, err := o.leases.Get(name)
	require.NoError(t, err)
	o.leases = fixedLeases{stuck.DeepCopy()}
	me := resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15,
		AcquireTime: metav1.NewTime(clk.Now()), RenewTime: metav1.NewTime(clk.Now())}
	require.NoError(t, lock.Update(ctx, me))
	r, _, err := lock.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "me", r.HolderIdentity, "the cache's older version was believed")
	clk.Step(o.cfg.RenewInterval())
	me.RenewTime = metav1.NewTime(clk.Now())
	require.NoError(t, lock.Update(ctx, me), "the renewal carried a version the API server no longer holds")

	// Another writer: a conflict, then the API server is asked.
	lease, err := kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	lease.Spec.HolderIdentity = ptr.To("other")
	_, err = kube.CoordinationV1().Leases(leaseNamespace).Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	clk.Step(o.cfg.RenewInterval())
	me.RenewTime = metav1.NewTime(clk.Now())
	require.Error(t, lock.Update(ctx, me))
	r, _, err = lock.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "other", r.HolderIdentity)
}
