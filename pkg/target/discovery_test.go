package target

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeDiscovery serves resource lists and counts reads. While block is
// set, a read waits until it is closed or the read's context ends.
type fakeDiscovery struct {
	mu       sync.Mutex
	lists    []*metav1.APIResourceList
	err      error
	reads    int
	block    chan struct{}
	inflight atomic.Int32
}

func (f *fakeDiscovery) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	f.mu.Lock()
	f.reads++
	block := f.block
	f.mu.Unlock()
	if block != nil {
		f.inflight.Add(1)
		defer f.inflight.Add(-1)
		select {
		case <-block:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.lists, f.err
}

func (f *fakeDiscovery) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// set changes what later reads return.
func (f *fakeDiscovery) set(lists []*metav1.APIResourceList, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists, f.err = lists, err
}

func (f *fakeDiscovery) add(list *metav1.APIResourceList) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, list)
}

func resourceList(gv string, resources ...metav1.APIResource) *metav1.APIResourceList {
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: resources}
}

func res(name, kind string) metav1.APIResource {
	return metav1.APIResource{Name: name, Kind: kind, Namespaced: true}
}

var (
	podSetGK      = schema.GroupKind{Group: testGroup, Kind: "PodSet"}
	scalableSetGK = schema.GroupKind{Group: testGroup, Kind: "ScalableSet"}
)

func TestDiscoveryKindsLookup(t *testing.T) {
	client := &fakeDiscovery{lists: []*metav1.APIResourceList{
		resourceList("apps/v1", res("deployments", "Deployment"), res("deployments/scale", "Scale"), res("deployments/status", "Deployment")),
		resourceList(testGroup+"/v1", res("podsets", "PodSet"), res("podsets/status", "PodSet"),
			res("scalablesets", "ScalableSet"), res("scalablesets/status", "ScalableSet")),
		// Only one version of ScalableSet has /scale: the kind has it.
		resourceList(testGroup+"/v2", res("scalablesets", "ScalableSet"), res("scalablesets/scale", "Scale")),
	}}
	d := NewDiscoveryKinds(client, func() time.Time { return time.Unix(0, 0) })
	tests := []struct {
		gk   schema.GroupKind
		want KindInfo
	}{
		{podSetGK, KindInfo{Served: true}},
		{scalableSetGK, KindInfo{Served: true, Scalable: true}},
		{schema.GroupKind{Group: "apps", Kind: "Deployment"}, KindInfo{Served: true, Scalable: true}},
		{schema.GroupKind{Group: testGroup, Kind: "Missing"}, KindInfo{}},
		{schema.GroupKind{Group: "other.example.com", Kind: "PodSet"}, KindInfo{}},
	}
	for _, tc := range tests {
		t.Run(tc.gk.String(), func(t *testing.T) {
			got, err := d.Lookup(context.Background(), tc.gk)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	assert.Equal(t, 1, client.count(), "one read serves every lookup within DiscoveryRetry")
}

func TestDiscoveryKindsRefresh(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Unix(0, 0))
	client := &fakeDiscovery{lists: []*metav1.APIResourceList{resourceList(testGroup+"/v1", res("podsets", "PodSet"))}}
	d := NewDiscoveryKinds(client, clock.Now)
	ctx := context.Background()

	got, err := d.Lookup(ctx, podSetGK)
	require.NoError(t, err)
	assert.Equal(t, KindInfo{Served: true}, got)

	t.Run("a kind installed later is found after DiscoveryRetry", func(t *testing.T) {
		client.add(resourceList(testGroup+"/v1", res("scalablesets", "ScalableSet"), res("scalablesets/scale", "Scale")))
		got, err := d.Lookup(ctx, scalableSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{}, got, "read less than DiscoveryRetry ago: not read again")
		reads := client.count()
		clock.Step(DiscoveryRetry)
		got, err = d.Lookup(ctx, scalableSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{Served: true, Scalable: true}, got)
		assert.Equal(t, reads+1, client.count())
	})

	t.Run("known kinds are not read again before DiscoveryTTL", func(t *testing.T) {
		reads := client.count()
		clock.Step(DiscoveryTTL - time.Second)
		_, err := d.Lookup(ctx, podSetGK)
		require.NoError(t, err)
		assert.Equal(t, reads, client.count())
	})

	t.Run("a /scale added to a CRD is seen after DiscoveryTTL, read in the background", func(t *testing.T) {
		client.add(resourceList(testGroup+"/v1", res("podsets", "PodSet"), res("podsets/scale", "Scale")))
		reads := client.count()
		clock.Step(DiscoveryTTL)
		_, err := d.Lookup(ctx, podSetGK)
		require.NoError(t, err, "answered from the last read")
		require.Eventually(t, func() bool {
			got, err := d.Lookup(ctx, podSetGK)
			return err == nil && got == KindInfo{Served: true, Scalable: true}
		}, waitFor, time.Millisecond)
		assert.Equal(t, reads+1, client.count(), "one read, however many lookups")
	})

	t.Run("a failed refresh keeps what was read, and is not retried before DiscoveryRetry", func(t *testing.T) {
		client.set(client.lists, errors.New("connection refused"))
		reads := client.count()
		clock.Step(DiscoveryTTL)
		got, err := d.Lookup(ctx, podSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{Served: true, Scalable: true}, got)
		require.Eventually(t, func() bool { return client.count() == reads+1 }, waitFor, time.Millisecond, "read again in the background")
		_, err = d.Lookup(ctx, schema.GroupKind{Group: testGroup, Kind: "New"})
		require.Error(t, err, "an unseen kind cannot be told apart from a missing one")
		assert.Contains(t, err.Error(), "connection refused")
		got, err = d.Lookup(ctx, podSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{Served: true, Scalable: true}, got, "what was read still answers")
		assert.Equal(t, reads+1, client.count(), "no read again within DiscoveryRetry")
	})
}

func TestDiscoveryKindsFailures(t *testing.T) {
	now := time.Unix(0, 0)
	ctx := context.Background()

	t.Run("first read fails: an error, retried after DiscoveryRetry", func(t *testing.T) {
		client := &fakeDiscovery{err: errors.New("connection refused")}
		d := NewDiscoveryKinds(client, func() time.Time { return now })
		_, err := d.Lookup(ctx, podSetGK)
		require.Error(t, err)
		_, err = d.Lookup(ctx, podSetGK)
		require.Error(t, err)
		assert.Equal(t, 1, client.count())
		client.set([]*metav1.APIResourceList{resourceList(testGroup+"/v1", res("podsets", "PodSet"))}, nil)
		now = now.Add(DiscoveryRetry)
		got, err := d.Lookup(ctx, podSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{Served: true}, got)
	})

	t.Run("a group that failed: an error for its kinds only", func(t *testing.T) {
		client := &fakeDiscovery{
			lists: []*metav1.APIResourceList{resourceList(testGroup+"/v1", res("podsets", "PodSet"))},
			err: &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{
				{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("service unavailable"),
			}},
		}
		d := NewDiscoveryKinds(client, func() time.Time { return now })
		got, err := d.Lookup(ctx, podSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{Served: true}, got)
		_, err = d.Lookup(ctx, schema.GroupKind{Group: "metrics.k8s.io", Kind: "PodMetrics"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "service unavailable")
	})
}

func TestDiscoveryKindsResource(t *testing.T) {
	client := &fakeDiscovery{lists: []*metav1.APIResourceList{
		resourceList(coreGroup+"/v1", res("strimzipodsets", "StrimziPodSet"), res("strimzipodsets/status", "StrimziPodSet")),
		resourceList(coreGroup+"/v1beta2", res("strimzipodsets", "StrimziPodSet")),
		resourceList(testGroup+"/v1", metav1.APIResource{Name: "clusterthings", Kind: "ClusterThing"}),
	}}
	d := NewDiscoveryKinds(client, func() time.Time { return time.Unix(0, 0) })
	ctx := context.Background()

	got, ok, err := d.Resource(ctx, schema.GroupKind{Group: coreGroup, Kind: "StrimziPodSet"})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, KindResource{Resource: schema.GroupVersionResource{Group: coreGroup, Version: "v1", Resource: "strimzipodsets"}, Namespaced: true}, got,
		"the first version listed, the resource rather than its status")

	got, ok, err = d.Resource(ctx, schema.GroupKind{Group: testGroup, Kind: "ClusterThing"})
	require.NoError(t, err)
	require.True(t, ok)
	assert.False(t, got.Namespaced)

	_, ok, err = d.Resource(ctx, schema.GroupKind{Group: testGroup, Kind: "Missing"})
	require.NoError(t, err)
	assert.False(t, ok)
}

// Issue #32, item 15: while discovery is read again for a kind it has not
// seen (a tenant's VPA or ownerReference can name any kind), lookups of
// kinds it has seen are answered at once, from the last read; a lookup
// that waits for the read waits no longer than its context. On 12d10ae
// every lookup waited for the read under one lock (453 ms seen).
func TestDiscoveryRefreshDoesNotBlockKnownKinds(t *testing.T) {
	now := time.Unix(0, 0)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	client := &fakeDiscovery{lists: []*metav1.APIResourceList{resourceList(testGroup+"/v1", res("podsets", "PodSet"))}}
	d := NewDiscoveryKinds(client, clock)
	_, err := d.Lookup(context.Background(), podSetGK)
	require.NoError(t, err)

	clockMu.Lock()
	now = now.Add(DiscoveryRetry)
	clockMu.Unlock()
	release := make(chan struct{})
	client.mu.Lock()
	client.block = release
	client.mu.Unlock()
	unknown := make(chan error, 1)
	go func() {
		_, err := d.Lookup(context.Background(), schema.GroupKind{Group: testGroup, Kind: "Unknown"})
		unknown <- err
	}()
	require.Eventually(t, func() bool { return client.inflight.Load() == 1 }, waitFor, time.Millisecond, "a read for the unknown kind")

	known := make(chan KindInfo, 1)
	go func() {
		info, err := d.Lookup(context.Background(), podSetGK)
		assert.NoError(t, err)
		known <- info
	}()
	select {
	case info := <-known:
		assert.Equal(t, KindInfo{Served: true}, info)
	case <-time.After(waitFor):
		close(release)
		t.Fatal("a lookup of a known kind waited for the read of an unknown one")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := d.Lookup(ctx, schema.GroupKind{Group: testGroup, Kind: "Other"})
		waited <- err
	}()
	select {
	case err := <-waited:
		require.ErrorIs(t, err, context.DeadlineExceeded, "a lookup waits for the read no longer than its context")
	case <-time.After(waitFor):
		close(release)
		t.Fatal("a lookup waiting for the read outlived its context")
	}

	close(release)
	require.NoError(t, <-unknown)
	assert.Equal(t, 2, client.count(), "one read for both unknown kinds")
}
