package target

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// fakeDiscovery serves resource lists and counts reads.
type fakeDiscovery struct {
	lists []*metav1.APIResourceList
	err   error
	reads int
}

func (f *fakeDiscovery) ServerGroupsAndResourcesWithContext(context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	f.reads++
	return nil, f.lists, f.err
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
	assert.Equal(t, 1, client.reads, "one read serves every lookup within DiscoveryRetry")
}

func TestDiscoveryKindsRefresh(t *testing.T) {
	now := time.Unix(0, 0)
	client := &fakeDiscovery{lists: []*metav1.APIResourceList{resourceList(testGroup+"/v1", res("podsets", "PodSet"))}}
	d := NewDiscoveryKinds(client, func() time.Time { return now })
	ctx := context.Background()

	got, err := d.Lookup(ctx, podSetGK)
	require.NoError(t, err)
	assert.Equal(t, KindInfo{Served: true}, got)

	t.Run("a kind installed later is found after DiscoveryRetry", func(t *testing.T) {
		client.lists = append(client.lists, resourceList(testGroup+"/v1", res("scalablesets", "ScalableSet"), res("scalablesets/scale", "Scale")))
		got, err := d.Lookup(ctx, scalableSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{}, got, "read less than DiscoveryRetry ago: not read again")
		reads := client.reads
		now = now.Add(DiscoveryRetry)
		got, err = d.Lookup(ctx, scalableSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{Served: true, Scalable: true}, got)
		assert.Equal(t, reads+1, client.reads)
	})

	t.Run("known kinds are not read again before DiscoveryTTL", func(t *testing.T) {
		reads := client.reads
		now = now.Add(DiscoveryTTL - time.Second)
		_, err := d.Lookup(ctx, podSetGK)
		require.NoError(t, err)
		assert.Equal(t, reads, client.reads)
	})

	t.Run("a /scale added to a CRD is seen after DiscoveryTTL", func(t *testing.T) {
		client.lists = append(client.lists, resourceList(testGroup+"/v1", res("podsets", "PodSet"), res("podsets/scale", "Scale")))
		now = now.Add(DiscoveryTTL)
		got, err := d.Lookup(ctx, podSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{Served: true, Scalable: true}, got)
	})

	t.Run("a failed refresh keeps what was read, and is not retried before DiscoveryRetry", func(t *testing.T) {
		client.err = errors.New("connection refused")
		now = now.Add(DiscoveryTTL)
		got, err := d.Lookup(ctx, podSetGK)
		require.NoError(t, err)
		assert.Equal(t, KindInfo{Served: true, Scalable: true}, got)
		reads := client.reads
		_, err = d.Lookup(ctx, schema.GroupKind{Group: testGroup, Kind: "New"})
		require.Error(t, err, "an unseen kind cannot be told apart from a missing one")
		assert.Contains(t, err.Error(), "connection refused")
		assert.Equal(t, reads, client.reads, "no read again within DiscoveryRetry")
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
		assert.Equal(t, 1, client.reads)
		client.err = nil
		client.lists = []*metav1.APIResourceList{resourceList(testGroup+"/v1", res("podsets", "PodSet"))}
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
