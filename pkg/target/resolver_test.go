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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpatarget "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target"
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

// fakeKinds answers Lookup from a map; kinds missing from it are not served.
type fakeKinds struct {
	kinds map[schema.GroupKind]KindInfo
	err   error
}

func (k fakeKinds) Lookup(_ context.Context, gk schema.GroupKind) (KindInfo, error) {
	if k.err != nil {
		return KindInfo{}, k.err
	}
	return k.kinds[gk], nil
}

const testGroup = "e2e.vpa-inplace.dev"

// clusterKinds serves PodSet (no /scale) and ScalableSet (with /scale) in
// testGroup.
var clusterKinds = fakeKinds{kinds: map[schema.GroupKind]KindInfo{
	{Group: testGroup, Kind: "PodSet"}:      {Served: true},
	{Group: testGroup, Kind: "ScalableSet"}: {Served: true, Scalable: true},
	{Group: "", Kind: "Node"}:               {Served: true},
	{Group: "", Kind: "Pod"}:                {Served: true},
}}

// upstreamWalk stands for upstream's controller fetcher: a PodSet has no
// /scale, so the walk from a pod stops there and finds nothing; any other
// controller is its own top-most controller.
type upstreamWalk struct{}

func (upstreamWalk) FindTopMostWellKnownOrScalable(_ context.Context, key *controllerfetcher.ControllerKeyWithAPIVersion) (*controllerfetcher.ControllerKeyWithAPIVersion, error) {
	if key.Kind == "PodSet" {
		return nil, nil
	}
	return key, nil
}

// newResolver is NewResolver over an indexer holding vpas.
func newResolver(t *testing.T, vpas []*vpatypes.VerticalPodAutoscaler, selectors vpatarget.VpaTargetSelectorFetcher,
	controllers controllerfetcher.ControllerFetcher, kinds Kinds, now func() time.Time, opts ...Option) *Resolver {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, v := range vpas {
		require.NoError(t, idx.Add(v))
	}
	r, err := NewResolver(idx, selectors, controllers, kinds, now, opts...)
	require.NoError(t, err)
	return r
}

func TestVPAForPod(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }

	older := testvpa.New("older").Target("apps/v1", "ReplicaSet", "web-1").InPlace().Obj()
	newer := testvpa.New("newer").Target("apps/v1", "ReplicaSet", "web-1").InPlace().Obj()
	newer.CreationTimestamp.Time = older.CreationTimestamp.Add(time.Hour)
	other := testvpa.New("other").Target("apps/v1", "ReplicaSet", "db").InPlace().Obj()
	broken := testvpa.New("broken").Target(testGroup+"/v1", "ScalableSet", "x").InPlace().Obj()
	fetcher := &countingFetcher{selectors: map[string]labels.Selector{"older": web, "newer": web, "other": web}}
	r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{newer, older, other, broken}, fetcher, controllerfetcher.FakeControllerFetcher{}, clusterKinds, clock)

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
	t.Run("targets are cached until the TTL passes", func(t *testing.T) {
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
		_, err := r.Target(context.Background(), broken)
		require.Error(t, err)
		calls := fetcher.calls
		_, err = r.Target(context.Background(), broken)
		require.Error(t, err)
		assert.Equal(t, calls, fetcher.calls, "reused within SelectorErrorTTL")
		now = now.Add(SelectorErrorTTL)
		_, err = r.Target(context.Background(), broken)
		require.Error(t, err)
		assert.Equal(t, calls+1, fetcher.calls, "fetched again after SelectorErrorTTL")
	})
	t.Run("a target that appears is found once the error expires", func(t *testing.T) {
		late := testvpa.New("late").Target("apps/v1", "Deployment", "late").InPlace().Obj()
		_, err := r.Target(context.Background(), late)
		require.Error(t, err)
		fetcher.selectors["late"] = web
		now = now.Add(SelectorErrorTTL)
		got, err := r.Target(context.Background(), late)
		require.NoError(t, err)
		assert.Equal(t, web, got.Selector)
	})
	t.Run("a VPA without targetRef is an error for Target", func(t *testing.T) {
		v := testvpa.New("no-target").Obj()
		v.Spec.TargetRef = nil
		_, err := r.Target(context.Background(), v)
		assert.Error(t, err)
	})
}

func TestTarget(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	podSet := Owner{Namespace: "default", Group: testGroup, Kind: "PodSet", Name: "kafka"}
	tests := []struct {
		name       string
		apiVersion string
		kind       string
		kinds      Kinds
		selector   labels.Selector // what upstream's selector fetch returns (nil: it fails)
		want       Target
		wantErr    []string
		// wantNoFetch: upstream's fetch is not called.
		wantNoFetch bool
	}{
		{name: "a well-known controller: upstream's selector", apiVersion: "apps/v1", kind: "StatefulSet",
			kinds: clusterKinds, selector: web, want: Target{Selector: web}},
		{name: "a custom resource with /scale: upstream's selector", apiVersion: testGroup + "/v1", kind: "ScalableSet",
			kinds: clusterKinds, selector: web, want: Target{Selector: web}},
		{name: "a custom resource without /scale: the pods it controls", apiVersion: testGroup + "/v1", kind: "PodSet",
			kinds: clusterKinds, want: Target{Owner: &podSet}},
		{name: "any version of the custom resource names it", apiVersion: testGroup + "/v1alpha1", kind: "PodSet",
			kinds: clusterKinds, want: Target{Owner: &podSet}},
		{name: "a kind discovery does not serve: an error, nothing fetched", apiVersion: testGroup + "/v1", kind: "Missing",
			kinds: clusterKinds, wantErr: []string{"kind Missing." + testGroup + " is not served"}, wantNoFetch: true},
		{name: "a core kind without /scale is never an owner", apiVersion: "v1", kind: "Node",
			kinds: clusterKinds, wantErr: []string{"no such target"}},
		{name: "a well-known kind in another group is left to upstream", apiVersion: testGroup + "/v1", kind: "Deployment",
			kinds:    fakeKinds{kinds: map[schema.GroupKind]KindInfo{{Group: testGroup, Kind: "Deployment"}: {Served: true}}},
			selector: web, want: Target{Selector: web}},
		{name: "discovery fails, upstream resolves: upstream's selector", apiVersion: testGroup + "/v1", kind: "ScalableSet",
			kinds: fakeKinds{err: errors.New("discovery down")}, selector: web, want: Target{Selector: web}},
		{name: "discovery and upstream both fail: both errors", apiVersion: testGroup + "/v1", kind: "PodSet",
			kinds: fakeKinds{err: errors.New("discovery down")}, wantErr: []string{"no such target", "discovery down"}},
		{name: "without discovery, upstream's rule only", apiVersion: testGroup + "/v1", kind: "PodSet",
			wantErr: []string{"no such target"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vpa := testvpa.New("v").Target(tc.apiVersion, tc.kind, "kafka").Obj()
			fetcher := &countingFetcher{selectors: map[string]labels.Selector{}}
			if tc.selector != nil {
				fetcher.selectors["v"] = tc.selector
			}
			r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{vpa}, fetcher, upstreamWalk{}, tc.kinds, time.Now)
			got, err := r.Target(context.Background(), vpa)
			if tc.wantNoFetch {
				assert.Zero(t, fetcher.calls)
			}
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			if got.Owner != nil {
				assert.Zero(t, fetcher.calls, "no /scale request for a resource known to have none")
			}
		})
	}
}

func TestVPAForPodOfCustomController(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	kafka := testvpa.New("kafka").Target(testGroup+"/v1", "PodSet", "kafka").InPlace().Obj()
	kafkaNewer := testvpa.New("kafka-newer").Target(testGroup+"/v1beta1", "PodSet", "kafka").InPlace().Obj()
	kafkaNewer.CreationTimestamp.Time = kafka.CreationTimestamp.Add(time.Hour)
	zoo := testvpa.New("zoo").Target(testGroup+"/v1", "PodSet", "zoo").InPlace().Obj()
	scalable := testvpa.New("scalable").Target(testGroup+"/v1", "ScalableSet", "web").InPlace().Obj()
	fetcher := &countingFetcher{selectors: map[string]labels.Selector{"scalable": web}}
	r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{kafkaNewer, kafka, zoo, scalable}, fetcher, upstreamWalk{}, clusterKinds, time.Now)

	tests := []struct {
		name string
		pod  *testpod.Builder
		want string // "" for no VPA
	}{
		{"pod controlled by the PodSet: the oldest of its VPAs", testpod.New("kafka-0").OwnedBy(testGroup+"/v1", "PodSet", "kafka"), "kafka"},
		{"the ownerReference's version does not matter", testpod.New("kafka-1").OwnedBy(testGroup+"/v1beta1", "PodSet", "kafka"), "kafka"},
		{"labels do not matter", testpod.New("kafka-2").Labels(nil).OwnedBy(testGroup+"/v1", "PodSet", "kafka"), "kafka"},
		{"another PodSet's pod", testpod.New("zoo-0").OwnedBy(testGroup+"/v1", "PodSet", "zoo"), "zoo"},
		{"a PodSet without VPA", testpod.New("x-0").OwnedBy(testGroup+"/v1", "PodSet", "x"), ""},
		{"same kind and name in another group", testpod.New("o-0").OwnedBy("other.example.com/v1", "PodSet", "kafka"), ""},
		{"same name, another kind", testpod.New("s-0").OwnedBy(testGroup+"/v1", "Broker", "kafka"), ""},
		{"same PodSet name in another namespace", testpod.New("k-0").Namespace("elsewhere").OwnedBy(testGroup+"/v1", "PodSet", "kafka"), ""},
		{"a scalable custom resource's pod: upstream's rule", testpod.New("web-0").OwnedBy(testGroup+"/v1", "ScalableSet", "web"), "scalable"},
		{"a scalable custom resource's pod must match its selector", testpod.New("web-1").Labels(map[string]string{"app": "db"}).OwnedBy(testGroup+"/v1", "ScalableSet", "web"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.VPAForPod(context.Background(), tc.pod.Obj())
			require.NoError(t, err)
			if tc.want == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got.Name)
		})
	}

	t.Run("a pod owned only without controller: true has no VPA", func(t *testing.T) {
		pod := testpod.New("loose").OwnedBy(testGroup+"/v1", "PodSet", "kafka").Obj()
		pod.OwnerReferences[0].Controller = nil
		got, err := r.VPAForPod(context.Background(), pod)
		require.NoError(t, err)
		assert.Nil(t, got)
	})
}

func TestCustomOwnerOf(t *testing.T) {
	tests := []struct {
		name string
		pod  *testpod.Builder
		want *Owner
	}{
		{"custom controller", testpod.New("p").OwnedBy(testGroup+"/v1", "PodSet", "kafka"),
			&Owner{Namespace: "default", Group: testGroup, Kind: "PodSet", Name: "kafka"}},
		{"no controller", testpod.New("p"), nil},
		{"well-known controller", testpod.New("p").OwnedBy("apps/v1", "StatefulSet", "db"), nil},
		{"well-known kind in another group", testpod.New("p").OwnedBy(testGroup+"/v1", "StatefulSet", "db"), nil},
		{"core group (a static pod's Node)", testpod.New("p").OwnedBy("v1", "Node", "node-1"), nil},
		{"unparsable apiVersion", testpod.New("p").OwnedBy("a/b/c", "PodSet", "kafka"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := CustomOwnerOf(tc.pod.Obj())
			if tc.want == nil {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, *tc.want, got)
			assert.Equal(t, "default/"+testGroup+"/PodSet/kafka", got.Key())
		})
	}
}

// blockingFetcher counts fetches and holds each until release is closed.
type blockingFetcher struct {
	calls   atomic.Int32
	release chan struct{}
}

func (f *blockingFetcher) Fetch(ctx context.Context, _ *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	f.calls.Add(1)
	select {
	case <-f.release:
		return labels.Everything(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The pods of one VPA that need its target at once share one resolution
// (one /scale read for a custom resource); a caller whose context ends
// stops waiting for it.
func TestTargetIsResolvedOnceForConcurrentCallers(t *testing.T) {
	vpa := testvpa.New("sets").Target(testGroup+"/v1", "ScalableSet", "web").InPlace().Obj()
	fetcher := &blockingFetcher{release: make(chan struct{})}
	r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{vpa}, fetcher, upstreamWalk{}, clusterKinds, time.Now)

	// The first caller gives up once its fetch has started (after a time,
	// it could give up before, on a busy machine, and fetch nothing).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gaveUp := make(chan error, 1)
	go func() {
		_, err := r.Target(ctx, vpa)
		gaveUp <- err
	}()
	require.Eventually(t, func() bool { return fetcher.calls.Load() == 1 }, waitFor, time.Millisecond)
	cancel()
	err := <-gaveUp
	require.ErrorIs(t, err, context.Canceled, "a caller waits no longer than its context")
	assert.True(t, RetryLater(ctx, err))

	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			got, err := r.Target(context.Background(), vpa)
			assert.NoError(t, err)
			assert.NotNil(t, got.Selector)
		})
	}
	require.Eventually(t, func() bool { return fetcher.calls.Load() == 2 }, waitFor, time.Millisecond)
	close(fetcher.release)
	wg.Wait()
	assert.EqualValues(t, 2, fetcher.calls.Load(), "one fetch given up with its caller, one for the 32 others")
}

// A custom resource's /scale read takes a share of the VPA's namespace's
// budget; with the share in use, the target is not read, and nothing is
// remembered.
func TestTargetTakesTheNamespacesShare(t *testing.T) {
	vpa := testvpa.New("sets").Target(testGroup+"/v1", "ScalableSet", "web").InPlace().Obj()
	web := testvpa.New("web").Target("apps/v1", "Deployment", "web").InPlace().Obj()
	fetcher := &countingFetcher{selectors: map[string]labels.Selector{"sets": labels.Everything(), "web": labels.Everything()}}
	budget := NewReadBudget(4, 1)
	r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{vpa, web}, fetcher, upstreamWalk{}, clusterKinds, time.Now, WithReadBudget(budget))
	ctx := context.Background()

	held, err := budget.Acquire(ctx, vpa.Namespace)
	require.NoError(t, err)
	_, err = r.Target(ctx, vpa)
	require.ErrorIs(t, err, ErrNamespaceBusy)
	assert.Zero(t, fetcher.calls)
	_, err = r.Target(ctx, web)
	require.NoError(t, err, "a well-known controller's selector comes from an informer: no share needed")
	held()

	got, err := r.Target(ctx, vpa)
	require.NoError(t, err, "the busy namespace was not remembered as a failure")
	assert.NotNil(t, got.Selector)
}

// countingWalk is upstreamWalk, counting its calls.
type countingWalk struct{ calls atomic.Int32 }

func (w *countingWalk) FindTopMostWellKnownOrScalable(ctx context.Context, key *controllerfetcher.ControllerKeyWithAPIVersion) (*controllerfetcher.ControllerKeyWithAPIVersion, error) {
	w.calls.Add(1)
	return upstreamWalk{}.FindTopMostWellKnownOrScalable(ctx, key)
}

// A pod whose controller is of a kind nobody serves (a tenant may write
// any kind) has no VPA under upstream's rule: upstream's walk, and its
// REST mapper, are not asked.
func TestVPAForPodOfAnUnservedController(t *testing.T) {
	vpa := testvpa.New("web").Target("apps/v1", "Deployment", "web").InPlace().Obj()
	walk := &countingWalk{}
	r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{vpa}, &countingFetcher{}, walk, clusterKinds, time.Now)
	got, err := r.VPAForPod(context.Background(), testpod.New("p").OwnedBy(testGroup+"/v1", "Garbage", "x").Obj())
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.Zero(t, walk.calls.Load())
	_, err = r.VPAForPod(context.Background(), testpod.New("q").OwnedBy(testGroup+"/v1", "ScalableSet", "x").Obj())
	require.NoError(t, err)
	assert.EqualValues(t, 1, walk.calls.Load(), "a scalable controller is upstream's to walk")
}
