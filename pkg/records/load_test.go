package records

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclient "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/typed/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"
)

// pagedVPAs serves VPAs a page at a time, or never answers.
type pagedVPAs struct {
	vpaclient.VerticalPodAutoscalerInterface
	items []vpatypes.VerticalPodAutoscaler
	hang  bool
	calls *[]metav1.ListOptions
}

func (p pagedVPAs) List(ctx context.Context, opts metav1.ListOptions) (*vpatypes.VerticalPodAutoscalerList, error) {
	*p.calls = append(*p.calls, opts)
	if p.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	start := 0
	if opts.Continue != "" {
		start, _ = strconv.Atoi(opts.Continue)
	}
	end := len(p.items)
	if opts.Limit > 0 {
		end = min(start+int(opts.Limit), end)
	}
	list := &vpatypes.VerticalPodAutoscalerList{Items: p.items[start:end]}
	if end < len(p.items) {
		list.Continue = strconv.Itoa(end)
	}
	return list, nil
}

type pagedGetter struct{ p pagedVPAs }

func (g pagedGetter) VerticalPodAutoscalers(string) vpaclient.VerticalPodAutoscalerInterface {
	return g.p
}

func emptyLister() vpalisters.VerticalPodAutoscalerLister {
	return vpalisters.NewVerticalPodAutoscalerLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
}

func TestVPAStoreLoadReadsEveryPage(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var items []vpatypes.VerticalPodAutoscaler
	for i := range 2*loadPageSize + 7 {
		items = append(items, *annotated("vpa-"+strconv.Itoa(i), map[types.UID]*Record{types.UID("pod-" + strconv.Itoa(i)): rec(KindNodeCapacity, "8", "no room", t0)}))
	}
	var calls []metav1.ListOptions
	s := NewVPAStore(pagedGetter{pagedVPAs{items: items, calls: &calls}}, emptyLister(), VPAStoreConfig{})
	require.NoError(t, s.Load(ctx))
	assert.Equal(t, len(items), s.Len())
	require.Len(t, calls, 3)
	for _, c := range calls {
		assert.EqualValues(t, loadPageSize, c.Limit, "never the whole list at once")
	}
}

func TestVPAStoreLoadGivesUpAfterItsTimeout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var calls []metav1.ListOptions
	s := NewVPAStore(pagedGetter{pagedVPAs{hang: true, calls: &calls}}, emptyLister(), VPAStoreConfig{LoadTimeout: 50 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- s.Load(ctx) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(time.Minute):
		t.Fatal("Load did not give up")
	}
	assert.ErrorIs(t, s.Loaded(), context.DeadlineExceeded, "readiness says why")
}

func TestVPAStoreLoad(t *testing.T) {
	broken := vpa("broken")
	broken.Annotations = map[string]string{AnnotationKey: "{not json"}
	f := newStoreFixture(t,
		annotated("web", map[types.UID]*Record{
			"pod-a": rec(KindNodeCapacity, "8", "no room", t0),
			"pod-b": rec(KindInfeasible, "4", "static cpu manager", t0),
		}),
		annotated("db", map[types.UID]*Record{"pod-a": rec(KindInvalid, "1", "newer, from the pod's new VPA", t0.Add(time.Hour))}),
		broken,
		vpa("plain"),
	)
	s := NewVPAStore(f.client.AutoscalingV1(), f.lister, VPAStoreConfig{})
	s.Put(webVPA, "pod-stale", rec(KindInvalid, "1", "held before loading", t0))
	require.NoError(t, s.Load(f.ctx))

	assert.Equal(t, 2, s.Len(), "loading replaces what was held")
	a, held := s.Get("pod-a")
	require.True(t, held)
	assert.Equal(t, KindInvalid, a.Kind, "a pod found on two VPAs keeps its newest record")
	b, held := s.Get("pod-b")
	require.True(t, held)
	assert.Equal(t, KindInfeasible, b.Kind)
	assert.True(t, t0.Equal(b.RecordedAt))

	t.Run("a failed list is an error, to be retried before any decision", func(t *testing.T) {
		f.client.PrependReactor("list", "verticalpodautoscalers", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("apiserver starting")
		})
		err := NewVPAStore(f.client.AutoscalingV1(), f.lister, VPAStoreConfig{}).Load(f.ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "listing VPAs")
	})
}

func TestTwoStoresShareAVPAThroughTheirOwnAnnotations(t *testing.T) {
	f := newStoreFixture(t, vpa("web"))
	infeasibleStore, stopInfeasible := f.start(VPAStoreConfig{})
	memoryStore, stopMemory := f.start(VPAStoreConfig{AnnotationKey: MemoryAnnotationKey})
	infeasibleStore.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "no room", t0))
	memoryStore.Put(webVPA, "pod-a", &Record{Kind: KindMemoryLimitRefused, Message: "cannot decrease memory limits",
		Attempted: resources.Resources{"app": res("", "", "", "100Mi")}, RecordedAt: t0})

	get := func() *vpatypes.VerticalPodAutoscaler {
		v, err := f.client.AutoscalingV1().VerticalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		return v
	}
	require.Eventually(t, func() bool {
		a := get().Annotations
		return a[AnnotationKey] != "" && a[MemoryAnnotationKey] != ""
	}, wait, tick)
	memory, err := decode(get().Annotations[MemoryAnnotationKey])
	require.NoError(t, err)
	require.Contains(t, memory, types.UID("pod-a"))
	assert.Equal(t, KindMemoryLimitRefused, memory["pod-a"].Kind)
	infeasibleOnes, err := decode(get().Annotations[AnnotationKey])
	require.NoError(t, err)
	assert.Equal(t, KindNodeCapacity, infeasibleOnes["pod-a"].Kind, "neither overwrites the other")

	// After a restart each store reads back its own records only.
	stopInfeasible()
	stopMemory()
	reloaded, _ := f.start(VPAStoreConfig{AnnotationKey: MemoryAnnotationKey})
	r, ok := reloaded.Get("pod-a")
	require.True(t, ok)
	assert.Equal(t, KindMemoryLimitRefused, r.Kind)
	q, ok := r.ContainerMemoryLimit("app")
	require.True(t, ok)
	assert.Equal(t, "100Mi", q.String())

	// Forgetting the memory record removes its annotation only.
	assert.True(t, reloaded.Delete("pod-a"))
	require.Eventually(t, func() bool { _, has := get().Annotations[MemoryAnnotationKey]; return !has }, wait, tick)
	assert.NotEmpty(t, get().Annotations[AnnotationKey])
}

// liveIn is a fake VPAStoreConfig.Live: the UIDs of the live pods and Jobs
// by namespace.
func liveIn(byNamespace map[string][]types.UID) func(Owner, types.UID) bool {
	return func(o Owner, uid types.UID) bool {
		for _, u := range byNamespace[o.Namespace] {
			if u == uid {
				return true
			}
		}
		return false
	}
}

func annotatedIn(namespace, name, value string) *vpatypes.VerticalPodAutoscaler {
	v := vpa(name)
	v.Namespace = namespace
	v.UID = types.UID("uid-" + namespace + "-" + name)
	v.Annotations = map[string]string{AnnotationKey: value}
	return v
}

// The review's cross-tenant case: a VPA in tenant-a, in mode Off, carries a
// record for the UID of default/p, recorded in 2099 with empty resources.
func TestVPAStoreLoadKeepsOnlyRecordsOfTheVPAsOwnPods(t *testing.T) {
	const victim = "5f0d8a62-7d7e-4b39-a0c4-1d1f3c6b9e01"
	hostile := `{"version":1,"attempts":[{"kind":"Infeasible","resources":{}}],"pods":{"` + victim + `":{"attempt":0,"recordedAt":"2099-01-01T00:00:00Z"}}}`
	forged := annotatedIn("tenant-a", "forged", doc(goodAttempt, `"`+victim+`":{"attempt":0,"recordedAt":"2026-05-01T10:00:00Z"}`))
	own := annotated("web", map[types.UID]*Record{victim: rec(KindNodeCapacity, "8", "no room", t0)})
	tests := []struct {
		name     string
		vpas     []*vpatypes.VerticalPodAutoscaler
		wantHeld bool
		want     map[DropReason]int
	}{
		{"hostile record on another tenant's VPA", []*vpatypes.VerticalPodAutoscaler{annotatedIn("tenant-a", "evil", hostile)}, false,
			map[DropReason]int{DropFuture: 1}},
		{"well-formed record on a VPA of another namespace", []*vpatypes.VerticalPodAutoscaler{forged}, false,
			map[DropReason]int{DropNotOwned: 1}},
		{"the record on the pod's own VPA is kept, the forged one dropped", []*vpatypes.VerticalPodAutoscaler{own, forged.DeepCopy()}, true,
			map[DropReason]int{DropNotOwned: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newStoreFixture(t, tc.vpas...)
			registry := prometheus.NewRegistry()
			m, err := NewMetrics(registry)
			require.NoError(t, err)
			s, _ := f.start(VPAStoreConfig{Live: liveIn(map[string][]types.UID{"default": {victim}}), Metrics: m, Now: func() time.Time { return t0 }})
			r, held := s.Get(victim)
			require.Equal(t, tc.wantHeld, held)
			if held {
				assert.Equal(t, "no room", r.Message, "the pod's own record, not the forged one")
			}
			for reason, n := range tc.want {
				assert.InDelta(t, n, testutil.ToFloat64(m.dropped.WithLabelValues(AnnotationKey, string(reason))), 0)
			}
			// The other tenant's annotation is rewritten without the record.
			for _, v := range tc.vpas {
				if v.Namespace == "tenant-a" {
					require.Eventually(t, func() bool {
						got, err := f.client.AutoscalingV1().VerticalPodAutoscalers(v.Namespace).Get(context.Background(), v.Name, metav1.GetOptions{})
						require.NoError(t, err)
						_, has := got.Annotations[AnnotationKey]
						return !has
					}, wait, tick)
				}
			}
		})
	}
}

func TestVPAStoreLoadReadsEveryOtherVPAPastHostileOnes(t *testing.T) {
	var vpas []*vpatypes.VerticalPodAutoscaler
	huge := make([]string, 10)
	for i := range huge {
		huge[i] = fmt.Sprintf(`{"kind":"Infeasible","resources":{"c%d":{"requests":{"cpu":"1e-99999999"}}}}`, i)
	}
	vpas = append(vpas,
		annotatedIn("tenant-a", "exponents", doc(strings.Join(huge, ","), `"a":{"attempt":0},"b":{"attempt":9}`)),
		annotatedIn("tenant-a", "oversized", doc(goodAttempt, `"c":{"attempt":0,"pad":"`+strings.Repeat("x", DefaultMaxAnnotationBytes)+`"}`)),
		annotatedIn("tenant-a", "garbage", "\x00{{{"),
	)
	for i := range 20 {
		vpas = append(vpas, annotated(fmt.Sprintf("ok-%d", i), map[types.UID]*Record{types.UID(fmt.Sprintf("pod-%d", i)): rec(KindNodeCapacity, "8", "no room", t0)}))
	}
	f := newStoreFixture(t, vpas...)
	s := NewVPAStore(f.client.AutoscalingV1(), f.lister, VPAStoreConfig{})
	require.ErrorIs(t, s.Loaded(), ErrNotLoaded, "not ready before Load")
	require.NoError(t, s.Load(f.ctx))
	require.NoError(t, s.Loaded())
	assert.Equal(t, 20, s.Len())
}

func TestVPAStoreLoadedReflectsAFailedLoad(t *testing.T) {
	f := newStoreFixture(t, vpa("web"))
	fail := true
	f.client.PrependReactor("list", "verticalpodautoscalers", func(clienttesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, apierrors.NewServiceUnavailable("apiserver starting")
		}
		return false, nil, nil
	})
	s := NewVPAStore(f.client.AutoscalingV1(), f.lister, VPAStoreConfig{})
	require.Error(t, s.Load(f.ctx))
	assert.ErrorContains(t, s.Loaded(), "apiserver starting")
	fail = false
	require.NoError(t, s.Load(f.ctx))
	assert.NoError(t, s.Loaded())
}

// A new leader whose cache has not seen the previous leader's last write
// (the worst case: it never does). Its Load read that write from the API
// server; deleting the record must remove it from the VPA.
func TestVPAStoreNewLeaderWithALaggingCacheRemovesADeletedRecord(t *testing.T) {
	f := newStoreFixture(t, vpa("web"))
	first, stopFirst := f.start(VPAStoreConfig{})
	first.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "no room", t0))
	require.Eventually(t, func() bool { return len(f.records("web")) == 1 }, wait, tick)
	stopFirst()

	// The new leader's cache still shows the VPA as it was before the write.
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(vpa("web")))
	second := NewVPAStore(f.client.AutoscalingV1(), vpalisters.NewVerticalPodAutoscalerLister(indexer), VPAStoreConfig{})
	require.NoError(t, second.Load(f.ctx))
	go second.Run(f.ctx)
	_, held := second.Get("pod-a")
	require.True(t, held)
	second.Delete("pod-a")
	require.Eventually(t, func() bool { return f.annotation("web") == "" }, wait, tick)
}
