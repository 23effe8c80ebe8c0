package target

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

type countingFetcher struct {
	selectors map[string]labels.Selector // by VPA name
	calls     int
}

func (f *countingFetcher) Fetch(_ context.Context, vpa *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	f.calls++
	if s, ok := f.selectors[vpa.Name]; ok {
		return s, nil
	}
	return nil, errors.New("no such target")
}

func lister(t *testing.T, vpas ...*vpatypes.VerticalPodAutoscaler) vpalisters.VerticalPodAutoscalerLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, v := range vpas {
		require.NoError(t, idx.Add(v))
	}
	return vpalisters.NewVerticalPodAutoscalerLister(idx)
}

func TestVPAForPod(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }

	older := testvpa.New("older").Target("apps/v1", "ReplicaSet", "web-1").InPlace().Obj()
	newer := testvpa.New("newer").Target("apps/v1", "ReplicaSet", "web-1").InPlace().Obj()
	newer.CreationTimestamp.Time = older.CreationTimestamp.Add(time.Hour)
	other := testvpa.New("other").Target("apps/v1", "ReplicaSet", "db").InPlace().Obj()
	broken := testvpa.New("broken").Target("example.com/v1", "Thing", "x").InPlace().Obj()
	fetcher := &countingFetcher{selectors: map[string]labels.Selector{"older": web, "newer": web, "other": web}}
	r := NewResolver(lister(t, newer, older, other, broken), fetcher, controllerfetcher.FakeControllerFetcher{}, clock)

	pod := testpod.New("p").OwnedBy("apps/v1", "ReplicaSet", "web-1").Obj()
	got, err := r.VPAForPod(context.Background(), pod)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "older", got.Name, "the oldest matching VPA controls the pod")

	t.Run("pod without controller has no VPA", func(t *testing.T) {
		got, err := r.VPAForPod(context.Background(), testpod.New("bare").Obj())
		require.NoError(t, err)
		assert.Nil(t, got)
	})
	t.Run("labels must match the target's selector", func(t *testing.T) {
		got, err := r.VPAForPod(context.Background(), testpod.New("x").Labels(map[string]string{"app": "db"}).OwnedBy("apps/v1", "ReplicaSet", "web-1").Obj())
		require.NoError(t, err)
		assert.Nil(t, got)
	})
	t.Run("other namespace has no VPA", func(t *testing.T) {
		got, err := r.VPAForPod(context.Background(), testpod.New("y").Namespace("elsewhere").OwnedBy("apps/v1", "ReplicaSet", "web-1").Obj())
		require.NoError(t, err)
		assert.Nil(t, got)
	})
	t.Run("selectors are cached until the TTL passes", func(t *testing.T) {
		calls := fetcher.calls
		_, err := r.VPAForPod(context.Background(), pod)
		require.NoError(t, err)
		assert.Equal(t, calls, fetcher.calls)
		now = now.Add(SelectorTTL)
		_, err = r.VPAForPod(context.Background(), pod)
		require.NoError(t, err)
		assert.Greater(t, fetcher.calls, calls)
	})
	t.Run("a failed fetch is reused only briefly", func(t *testing.T) {
		_, err := r.Selector(context.Background(), broken)
		require.Error(t, err)
		calls := fetcher.calls
		_, err = r.Selector(context.Background(), broken)
		require.Error(t, err)
		assert.Equal(t, calls, fetcher.calls, "reused within SelectorErrorTTL")
		now = now.Add(SelectorErrorTTL)
		_, err = r.Selector(context.Background(), broken)
		require.Error(t, err)
		assert.Equal(t, calls+1, fetcher.calls, "fetched again after SelectorErrorTTL")
	})
	t.Run("a target that appears is found once the error expires", func(t *testing.T) {
		late := testvpa.New("late").Target("apps/v1", "Deployment", "late").InPlace().Obj()
		_, err := r.Selector(context.Background(), late)
		require.Error(t, err)
		fetcher.selectors["late"] = web
		now = now.Add(SelectorErrorTTL)
		sel, err := r.Selector(context.Background(), late)
		require.NoError(t, err)
		assert.Equal(t, web, sel)
	})
	t.Run("a VPA without targetRef is an error for Selector", func(t *testing.T) {
		v := testvpa.New("no-target").Obj()
		v.Spec.TargetRef = nil
		_, err := r.Selector(context.Background(), v)
		assert.Error(t, err)
	})
}
