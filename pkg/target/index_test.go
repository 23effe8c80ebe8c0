package target

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// manyVPAs returns n VPAs, each targeting its own ReplicaSet rs-<i>, all
// selecting app=web (as badly written VPAs may).
func manyVPAs(n int) ([]*vpatypes.VerticalPodAutoscaler, map[string]labels.Selector) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	vpas := make([]*vpatypes.VerticalPodAutoscaler, n)
	selectors := map[string]labels.Selector{}
	for i := range vpas {
		name := fmt.Sprintf("vpa-%d", i)
		vpas[i] = testvpa.New(name).Target("apps/v1", "ReplicaSet", fmt.Sprintf("rs-%d", i)).InPlace().Obj()
		selectors[name] = web
	}
	return vpas, selectors
}

func TestVPAForPodResolvesOnlyTheVPAsOfItsController(t *testing.T) {
	vpas, selectors := manyVPAs(100)
	fetcher := &countingFetcher{selectors: selectors}
	r := newResolver(t, vpas, fetcher, controllerfetcher.FakeControllerFetcher{}, clusterKinds, time.Now)

	got, err := r.VPAForPod(context.Background(), testpod.New("p").OwnedBy("apps/v1", "ReplicaSet", "rs-42").Obj())
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "vpa-42", got.Name)
	assert.Equal(t, 1, fetcher.calls, "only the VPA naming the pod's controller is resolved, not the 99 others of the namespace")

	got, err = r.VPAForPod(context.Background(), testpod.New("q").OwnedBy("apps/v1", "ReplicaSet", "rs-none").Obj())
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.Equal(t, 1, fetcher.calls, "no VPA names the controller: nothing resolved")
}

func TestVPAForPodFollowsTargetRefChanges(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	vpa := testvpa.New("v").Target("apps/v1", "ReplicaSet", "old").InPlace().Obj()
	require.NoError(t, idx.Add(vpa))
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	r, err := NewResolver(idx, &countingFetcher{selectors: map[string]labels.Selector{"v": web}}, controllerfetcher.FakeControllerFetcher{}, nil, time.Now)
	require.NoError(t, err)
	ctx := context.Background()
	oldPod := testpod.New("a").OwnedBy("apps/v1", "ReplicaSet", "old").Obj()
	newPod := testpod.New("b").OwnedBy("apps/v1", "ReplicaSet", "new").Obj()

	got, err := r.VPAForPod(ctx, oldPod)
	require.NoError(t, err)
	require.NotNil(t, got)

	moved := vpa.DeepCopy()
	moved.Spec.TargetRef.Name = "new"
	moved.ResourceVersion = "2"
	require.NoError(t, idx.Update(moved))
	got, err = r.VPAForPod(ctx, oldPod)
	require.NoError(t, err)
	assert.Nil(t, got, "the VPA no longer names the old controller")
	got, err = r.VPAForPod(ctx, newPod)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "new", got.Spec.TargetRef.Name)

	require.NoError(t, idx.Delete(moved))
	got, err = r.VPAForPod(ctx, newPod)
	require.NoError(t, err)
	assert.Nil(t, got, "deleted VPAs are out of the index")
}

func TestIndexVPAs(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexVPAs(idx))
	require.NoError(t, indexVPAs(idx), "adding the indexes again is a no-op")
	assert.Contains(t, idx.GetIndexers(), targetRefIndex)
	assert.Contains(t, idx.GetIndexers(), cache.NamespaceIndex)

	noTarget := testvpa.New("no-target").Obj()
	noTarget.Spec.TargetRef = nil
	require.NoError(t, idx.Add(noTarget), "a VPA without targetRef is stored, under no target")
	keys, err := idx.IndexKeys(cache.NamespaceIndex, noTarget.Namespace)
	require.NoError(t, err)
	assert.Len(t, keys, 1)
}

// walkCounter counts upstream's walks from a pod up its controllers.
type walkCounter struct{ walks int }

func (w *walkCounter) FindTopMostWellKnownOrScalable(_ context.Context, key *controllerfetcher.ControllerKeyWithAPIVersion) (*controllerfetcher.ControllerKeyWithAPIVersion, error) {
	w.walks++
	return key, nil
}

func TestVPAForPodWalksNothingInANamespaceWithoutVPAs(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	vpa := testvpa.New("v").Target("apps/v1", "ReplicaSet", "web").InPlace().Obj()
	require.NoError(t, idx.Add(vpa))
	walks := &walkCounter{}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	r, err := NewResolver(idx, &countingFetcher{selectors: map[string]labels.Selector{"v": web}}, walks, nil, time.Now)
	require.NoError(t, err)
	ctx := context.Background()

	got, err := r.VPAForPod(ctx, testpod.New("p").Namespace("elsewhere").OwnedBy("apps/v1", "ReplicaSet", "web").Obj())
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.Zero(t, walks.walks, "no VPA in the pod's namespace: its controllers are not looked up")

	got, err = r.VPAForPod(ctx, testpod.New("p").OwnedBy("apps/v1", "ReplicaSet", "web").Obj())
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Equal(t, 1, walks.walks)

	require.NoError(t, idx.Delete(vpa))
	got, err = r.VPAForPod(ctx, testpod.New("p").OwnedBy("apps/v1", "ReplicaSet", "web").Obj())
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.Equal(t, 1, walks.walks, "the namespace's last VPA is gone: nothing looked up")
}

// BenchmarkVPAForPod: finding the VPA of one pod among the VPAs of a
// namespace. Compare ns/op across -benchtime runs of different sizes: it
// stays flat as the namespace grows.
func BenchmarkVPAForPod(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("vpas=%d", n), func(b *testing.B) {
			vpas, selectors := manyVPAs(n)
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, v := range vpas {
				require.NoError(b, idx.Add(v))
			}
			r, err := NewResolver(idx, &countingFetcher{selectors: selectors}, controllerfetcher.FakeControllerFetcher{}, nil, time.Now)
			require.NoError(b, err)
			pod := testpod.New("p").OwnedBy("apps/v1", "ReplicaSet", fmt.Sprintf("rs-%d", n/2)).Obj()
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if v, err := r.VPAForPod(ctx, pod); err != nil || v == nil {
					b.Fatalf("VPAForPod = %v, %v", v, err)
				}
			}
		})
	}
}

func TestVPAForPodDoesNotWalkFromACustomControllerWithoutScale(t *testing.T) {
	// The namespace has a VPA, on another PodSet: the pod of a PodSet
	// without VPA has none, and upstream's walk is not asked (it would stop
	// at the PodSet, which has no /scale).
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, idx.Add(testvpa.New("kafka").Target(testGroup+"/v1", "PodSet", "kafka").InPlace().Obj()))
	walks := &walkCounter{}
	r, err := NewResolver(idx, &countingFetcher{}, walks, clusterKinds, time.Now)
	require.NoError(t, err)
	ctx := context.Background()

	got, err := r.VPAForPod(ctx, testpod.New("zoo-0").OwnedBy(testGroup+"/v1", "PodSet", "zoo").Obj())
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.Zero(t, walks.walks)

	got, err = r.VPAForPod(ctx, testpod.New("kafka-0").OwnedBy(testGroup+"/v1", "PodSet", "kafka").Obj())
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Zero(t, walks.walks)

	_, err = r.VPAForPod(ctx, testpod.New("web-0").OwnedBy(testGroup+"/v1", "ScalableSet", "web").Obj())
	require.NoError(t, err)
	assert.Equal(t, 1, walks.walks, "a custom controller with /scale is walked from, as upstream does")
}
