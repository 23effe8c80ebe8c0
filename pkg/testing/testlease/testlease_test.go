package testlease

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"
)

const namespace = "vpa-inplace-system"

func lease(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func versioned(t *testing.T, objs ...*coordinationv1.Lease) coordinationv1client.LeaseInterface {
	t.Helper()
	kube := kubefake.NewClientset()
	for _, o := range objs {
		require.NoError(t, kube.Tracker().Add(o))
	}
	Versioned(kube)
	return kube.CoordinationV1().Leases(namespace)
}

func version(t *testing.T, l *coordinationv1.Lease) int {
	t.Helper()
	v, err := strconv.Atoi(l.ResourceVersion)
	require.NoError(t, err, "resourceVersion %q", l.ResourceVersion)
	return v
}

func TestWritesGetNewResourceVersions(t *testing.T) {
	ctx := context.Background()
	leases := versioned(t, lease("shipped"))

	shipped, err := leases.Get(ctx, "shipped", metav1.GetOptions{})
	require.NoError(t, err)
	first := version(t, shipped)

	created, err := leases.Create(ctx, lease("created"), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Greater(t, version(t, created), first, "a create gets a new resourceVersion")
	got, err := leases.Get(ctx, "created", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, created.ResourceVersion, got.ResourceVersion, "and keeps it")

	got.Spec.HolderIdentity = ptr.To("a")
	updated, err := leases.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Greater(t, version(t, updated), version(t, created), "an update gets a new one")
	assert.Equal(t, "a", ptr.Deref(updated.Spec.HolderIdentity, ""))
	got, err = leases.Get(ctx, "created", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, updated, got)
}

func TestRefusedWrites(t *testing.T) {
	ctx := context.Background()
	leases := versioned(t, lease("shipped"))
	stale, err := leases.Get(ctx, "shipped", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = leases.Update(ctx, stale.DeepCopy(), metav1.UpdateOptions{})
	require.NoError(t, err)

	_, err = leases.Update(ctx, stale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "a stale update: %v", err)

	stale.ResourceVersion = ""
	_, err = leases.Update(ctx, stale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "an update without resourceVersion: %v", err)

	_, err = leases.Update(ctx, lease("missing"), metav1.UpdateOptions{})
	assert.True(t, apierrors.IsNotFound(err), "an update of a missing Lease: %v", err)

	withVersion := lease("new")
	withVersion.ResourceVersion = "7"
	_, err = leases.Create(ctx, withVersion, metav1.CreateOptions{})
	assert.True(t, apierrors.IsBadRequest(err), "a create with resourceVersion: %v", err)

	_, err = leases.Create(ctx, lease("shipped"), metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "a create of an existing Lease: %v", err)
}

// Candidates that all read the Lease and then all write it, as a leader
// election's candidates do, are refused but one per version read: no two
// of them win from the same read. The fake alone lets every one win.
func TestOneWinnerPerVersionRead(t *testing.T) {
	ctx := context.Background()
	leases := versioned(t, lease("election"))
	const candidates = 16
	var (
		mu   sync.Mutex
		wins = map[string][]string{} // version read -> winners
		wg   sync.WaitGroup
	)
	for i := range candidates {
		wg.Go(func() {
			name := fmt.Sprintf("c%d", i)
			for range 20 {
				l, err := leases.Get(ctx, "election", metav1.GetOptions{})
				if !assert.NoError(t, err) {
					return
				}
				l.Spec.HolderIdentity = ptr.To(name)
				_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
				if err != nil {
					assert.True(t, apierrors.IsConflict(err), "refused with a conflict: %v", err)
					continue
				}
				mu.Lock()
				wins[l.ResourceVersion] = append(wins[l.ResourceVersion], name)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, wins)
	for v, winners := range wins {
		assert.Len(t, winners, 1, "winners from version %q", v)
	}
}

func TestWrapCallsTheHooks(t *testing.T) {
	ctx := context.Background()
	kube := kubefake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "held"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")},
	})
	var mu sync.Mutex
	var seen []string
	note := func(what string) func(*coordinationv1.Lease) {
		return func(l *coordinationv1.Lease) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, what+" "+ptr.Deref(l.Spec.HolderIdentity, ""))
		}
	}
	client := Wrap(kube, Hooks{Read: note("read"), Update: note("update")})
	leases := client.CoordinationV1().Leases(namespace)
	l, err := leases.Get(ctx, "held", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = leases.Get(ctx, "missing", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
	l.Spec.HolderIdentity = ptr.To("b")
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = leases.Get(ctx, "held", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the rest of the clientset is kube's")
	assert.Equal(t, []string{"read a", "update b", "read b"}, seen, "the missing Lease is not seen")

	_, err = Wrap(kube, Hooks{}).CoordinationV1().Leases(namespace).Get(ctx, "held", metav1.GetOptions{})
	require.NoError(t, err, "no hooks")
}
