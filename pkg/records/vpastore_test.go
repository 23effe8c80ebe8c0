package records

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// wait bounds each wait for a condition that the code meets within
// milliseconds (or a retry's backoff) on an idle machine: generous, so that
// a busy one does not fail a test that would pass.
const (
	wait = time.Minute
	tick = 10 * time.Millisecond
)

type storeFixture struct {
	t      *testing.T
	ctx    context.Context
	client *vpafake.Clientset
	lister vpalisters.VerticalPodAutoscalerLister
}

func newStoreFixture(t *testing.T, vpas ...*vpatypes.VerticalPodAutoscaler) *storeFixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	objs := make([]runtime.Object, 0, len(vpas))
	for _, v := range vpas {
		objs = append(objs, v)
	}
	client := vpafake.NewSimpleClientset(objs...)
	factory := vpainformers.NewSharedInformerFactory(client, 0)
	informer := factory.Autoscaling().V1().VerticalPodAutoscalers()
	lister := informer.Lister()
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced))
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	return &storeFixture{t: t, ctx: ctx, client: client, lister: lister}
}

// start returns a loaded store whose writer runs until stop is called or
// the test ends.
func (f *storeFixture) start(cfg VPAStoreConfig) (s *VPAStore, stop func()) {
	f.t.Helper()
	s = NewVPAStore(f.client.AutoscalingV1(), f.lister, cfg)
	observeWrites(&s.durable)
	require.NoError(f.t, s.Load(f.ctx))
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	stop = func() { cancel(); <-done }
	f.t.Cleanup(stop)
	return s, stop
}

// annotation reads the VPA's annotation from the API.
func (f *storeFixture) annotation(name string) string {
	v, err := f.client.AutoscalingV1().VerticalPodAutoscalers("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return v.Annotations[AnnotationKey]
}

// cached reads the VPA's annotation from the informer cache.
func (f *storeFixture) cached(name string) string {
	v, err := f.lister.VerticalPodAutoscalers("default").Get(name)
	if err != nil {
		return ""
	}
	return v.Annotations[AnnotationKey]
}

func (f *storeFixture) records(name string) map[types.UID]*Record {
	f.t.Helper()
	value := f.annotation(name)
	if value == "" {
		return nil
	}
	r, err := decode(value)
	require.NoError(f.t, err)
	return r
}

// patches returns the bodies of the patches sent to VPAs.
func (f *storeFixture) patches() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "verticalpodautoscalers" {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func (f *storeFixture) failPatches(times int, err error) {
	n := 0
	f.client.PrependReactor("patch", "verticalpodautoscalers", func(clienttesting.Action) (bool, runtime.Object, error) {
		if n >= times {
			return false, nil, nil
		}
		n++
		return true, nil, err
	})
}

func vpa(name string) *vpatypes.VerticalPodAutoscaler {
	return testvpa.New(name).InPlace().Obj()
}

func annotated(name string, records map[types.UID]*Record) *vpatypes.VerticalPodAutoscaler {
	v := vpa(name)
	value, _, err := EncodeAnnotation(records, DefaultMaxAnnotationBytes)
	if err != nil {
		panic(err)
	}
	v.Annotations = map[string]string{AnnotationKey: value}
	return v
}

var webVPA = Owner{Namespace: "default", Name: "web", UID: "uid-web"}

func TestVPAStoreWritesRecordsOntoTheVPA(t *testing.T) {
	f := newStoreFixture(t, vpa("web"))
	s, _ := f.start(VPAStoreConfig{})
	r := rec(KindNodeCapacity, "8", "node didn't have enough allocatable resources: cpu", t0)
	s.Put(webVPA, "pod-a", r)

	got, held := s.Get("pod-a")
	require.True(t, held, "held in memory at once, before any write")
	assert.Same(t, r, got)
	require.Eventually(t, func() bool { return len(f.records("web")) == 1 }, wait, tick)
	written := f.records("web")["pod-a"]
	require.NotNil(t, written)
	assert.Equal(t, KindNodeCapacity, written.Kind)
	assert.True(t, resources.Equal(r.Attempted, written.Attempted))
	require.Len(t, f.patches(), 1)
	assert.Contains(t, f.patches()[0], `"uid":"uid-web"`, "the write only applies to this VPA, not to a new one of the same name")
	assert.NotContains(t, f.patches()[0], `"spec"`, "metadata only")
	assert.NotContains(t, f.patches()[0], `"status"`, "metadata only")

	t.Run("written only when the value changes", func(t *testing.T) {
		require.Eventually(t, func() bool { return f.cached("web") != "" }, wait, tick)
		s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "node didn't have enough allocatable resources: cpu", t0))
		assert.Empty(t, s.Retain(func(types.UID) bool { return true }))
		waitWritten(t, &s.durable, webVPA)
		assert.Len(t, f.patches(), 1)
	})

	t.Run("a second pod of the VPA: one more write with both", func(t *testing.T) {
		s.Put(webVPA, "pod-b", rec(KindNodeCapacity, "8", "node didn't have enough allocatable resources: cpu", t0.Add(time.Minute)))
		require.Eventually(t, func() bool { return len(f.records("web")) == 2 }, wait, tick)
		assert.Len(t, f.patches(), 2)
	})

	t.Run("records of pods that are gone are removed", func(t *testing.T) {
		assert.Equal(t, []types.UID{"pod-b"}, s.Retain(func(uid types.UID) bool { return uid == "pod-a" }))
		require.Eventually(t, func() bool { return len(f.records("web")) == 1 }, wait, tick)
		_, held := f.records("web")["pod-a"]
		assert.True(t, held)
	})

	t.Run("the last record deleted removes the annotation", func(t *testing.T) {
		assert.True(t, s.Delete("pod-a"))
		require.Eventually(t, func() bool { return f.annotation("web") == "" }, wait, tick)
		v, err := f.client.AutoscalingV1().VerticalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotContains(t, v.Annotations, AnnotationKey)
	})
}

func TestVPAStoreSurvivesRestartAndLeaderChange(t *testing.T) {
	f := newStoreFixture(t, vpa("web"), vpa("db"))
	first, stopFirst := f.start(VPAStoreConfig{})
	first.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "no room", t0))
	first.Put(Owner{Namespace: "default", Name: "db", UID: "uid-db"}, "pod-b", rec(KindInvalid, "300m", "qos", t0))
	require.Eventually(t, func() bool { return len(f.records("web")) == 1 && len(f.records("db")) == 1 }, wait, tick)
	stopFirst() // the process restarts, or another replica takes the lease

	second, _ := f.start(VPAStoreConfig{})
	assert.Equal(t, 2, second.Len())
	r, held := second.Get("pod-a")
	require.True(t, held, "the new leader knows the record before any decision")
	assert.Equal(t, Same, r.Compare(resources.Resources{"app": res("8", "100Mi", "", "")}), "no repeated attempt for the same values")
	r, held = second.Get("pod-b")
	require.True(t, held)
	assert.Equal(t, KindInvalid, r.Kind)

	t.Run("the new leader goes on writing", func(t *testing.T) {
		second.Delete("pod-a")
		require.Eventually(t, func() bool { return f.annotation("web") == "" }, wait, tick)
		assert.Len(t, f.records("db"), 1)
	})
}

func TestVPAStoreWriteErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "autoscaling.k8s.io", Resource: "verticalpodautoscalers"}
	gk := schema.GroupKind{Group: gr.Group, Kind: "VerticalPodAutoscaler"}
	tests := []struct {
		name        string
		err         error
		times       int
		written     bool
		wantCalls   int
		wantFailure string // reason counted per failed write
	}{
		{"server error: retried until written", apierrors.NewInternalError(errors.New("etcd leader changed")), 2, true, 3, WriteOther},
		{"throttled: retried until written", apierrors.NewTooManyRequests("slow down", 0), 1, true, 2, WriteOther},
		{"connection error: retried until written", fmt.Errorf("dial: %w", context.DeadlineExceeded), 1, true, 2, WriteOther},
		{"annotations too large: retried until written", apierrors.NewInvalid(gk, "web",
			field.ErrorList{field.TooLong(field.NewPath("metadata", "annotations"), "", 262144)}), 2, true, 3, WriteTooLarge},
		{"refused by a webhook: retried until written", apierrors.NewInvalid(gk, "web",
			field.ErrorList{field.Invalid(field.NewPath("spec", "resourcePolicy"), "0.1Gi", "not allowed")}), 1, true, 2, WriteInvalid},
		{"conflict: retried until written", apierrors.NewConflict(gr, "web", errors.New("the object has been modified")), 1, true, 2, WriteConflict},
		{"forbidden: retried until written", apierrors.NewForbidden(gr, "web", errors.New("denied by policy")), 1, true, 2, WriteForbidden},
		{"VPA gone: not retried", apierrors.NewNotFound(gr, "web"), 100, false, 1, ""},
		{"another VPA of the same name (uid refused): not retried", apierrors.NewInvalid(gk, "web",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "uid-web", "field is immutable")}), 100, false, 1, ""},
		{"uid precondition failed: not retried", apierrors.NewConflict(gr, "web", errors.New("Precondition failed: UID in precondition: uid-web, UID in object meta: uid-new")), 100, false, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newStoreFixture(t, vpa("web"))
			f.failPatches(tc.times, tc.err)
			m, err := NewMetrics(prometheus.NewRegistry())
			require.NoError(t, err)
			s, _ := f.start(VPAStoreConfig{Metrics: m})
			s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "no room", t0))
			if tc.written {
				require.Eventually(t, func() bool { return len(f.records("web")) == 1 }, wait, tick)
			} else {
				waitWritten(t, &s.durable, webVPA)
				assert.Zero(t, s.queue.NumRequeues(webVPA.id()), "not queued again")
				assert.Empty(t, f.annotation("web"))
			}
			assert.Len(t, f.patches(), tc.wantCalls)
			_, held := s.Get("pod-a")
			assert.True(t, held, "the record is held in memory whatever the write did")
			if tc.wantFailure != "" {
				assert.InDelta(t, tc.times, testutil.ToFloat64(m.failures.WithLabelValues(AnnotationKey, tc.wantFailure)), 0)
			}
			if !tc.written {
				assert.Zero(t, testutil.CollectAndCount(m.failures), "gone is no failure")
			}
		})
	}
}

func TestVPAStoreKeepsTheAnnotationSmall(t *testing.T) {
	f := newStoreFixture(t, vpa("web"))
	s, _ := f.start(VPAStoreConfig{MaxBytes: 600})
	for i := range 20 {
		s.Put(webVPA, types.UID(fmt.Sprintf("pod-%02d", i)), rec(KindNodeCapacity, fmt.Sprintf("%dm", 4000+i), "no room", t0.Add(time.Duration(i)*time.Minute)))
	}
	require.Eventually(t, func() bool { return f.annotation("web") != "" }, wait, tick)
	require.Eventually(t, func() bool { _, held := f.records("web")["pod-19"]; return held }, wait, tick)
	assert.LessOrEqual(t, len(f.annotation("web")), 600)
	assert.Less(t, len(f.records("web")), 20)
	assert.Equal(t, 20, s.Len(), "records left out of the annotation are still held")
}

func TestVPAStorePodMovedToAnotherVPA(t *testing.T) {
	f := newStoreFixture(t, vpa("web"), vpa("db"))
	s, _ := f.start(VPAStoreConfig{})
	s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "no room", t0))
	require.Eventually(t, func() bool { return len(f.records("web")) == 1 }, wait, tick)
	s.Put(Owner{Namespace: "default", Name: "db", UID: "uid-db"}, "pod-a", rec(KindNodeCapacity, "9", "no room", t0.Add(time.Minute)))
	require.Eventually(t, func() bool { return f.annotation("web") == "" && len(f.records("db")) == 1 }, wait, tick)
}

// A cache that never sees the store's own writes: the worst case of an
// informer lagging behind them.
func TestVPAStoreWithACacheLaggingBehindItsWrites(t *testing.T) {
	f := newStoreFixture(t, vpa("web"))
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(vpa("web")))
	s := NewVPAStore(f.client.AutoscalingV1(), vpalisters.NewVerticalPodAutoscalerLister(indexer), VPAStoreConfig{})
	observeWrites(&s.durable)
	require.NoError(t, s.Load(f.ctx))
	go s.Run(f.ctx)

	s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "no room", t0))
	require.Eventually(t, func() bool { return len(f.records("web")) == 1 }, wait, tick)

	t.Run("the same records again: no second write", func(t *testing.T) {
		s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "no room", t0))
		waitWritten(t, &s.durable, webVPA)
		assert.Len(t, f.patches(), 1)
	})
	t.Run("the record deleted: the annotation is removed though the cache never showed it", func(t *testing.T) {
		assert.True(t, s.Delete("pod-a"))
		require.Eventually(t, func() bool { return f.annotation("web") == "" }, wait, tick)
		assert.Len(t, f.patches(), 2)
	})
}

func TestVPAStoreForgetOwnerWritesNothing(t *testing.T) {
	f := newStoreFixture(t, vpa("web"))
	s, _ := f.start(VPAStoreConfig{})
	s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "no room", t0))
	require.Eventually(t, func() bool { return len(f.patches()) == 1 }, wait, tick)
	require.NoError(t, f.client.AutoscalingV1().VerticalPodAutoscalers("default").Delete(context.Background(), "web", metav1.DeleteOptions{}))
	assert.Equal(t, 1, s.ForgetOwner(webVPA))
	assert.Equal(t, 0, s.Len())
	waitWritten(t, &s.durable, webVPA)
	assert.Zero(t, s.queue.Len(), "nothing queued")
	assert.Len(t, f.patches(), 1)
}

// Workers put and delete records of several VPAs' pods while the store
// writes: once they stop, each VPA carries exactly the records held. A
// write that read the records, then lost a change made before its patch
// returned, would leave a VPA behind.
func TestVPAStoreConcurrentWorkersEndWithTheRecordsHeld(t *testing.T) {
	f := newStoreFixture(t, concurrentVPAs()...)
	s, _ := f.start(VPAStoreConfig{})
	checkConcurrentWorkers(t, &s.durable, f.records)
}

// concurrentVPAs are the VPAs checkConcurrentWorkers puts records for.
func concurrentVPAs() []*vpatypes.VerticalPodAutoscaler {
	return []*vpatypes.VerticalPodAutoscaler{vpa("web"), vpa("db"), vpa("cache")}
}

// checkConcurrentWorkers has 8 workers put and delete records of the pods
// of concurrentVPAs in s at once, then waits until written(vpa) holds, for
// each VPA, the records s holds.
func checkConcurrentWorkers(t *testing.T, s *durable, written func(vpa string) map[types.UID]*Record) {
	t.Helper()
	names := []string{"web", "db", "cache"}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				name := names[(w+i)%len(names)]
				owner := Owner{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}
				uid := types.UID(fmt.Sprintf("pod-%d-%d", w, i%5))
				if i%3 == 2 {
					s.Delete(uid)
					continue
				}
				s.Put(owner, uid, rec(KindNodeCapacity, fmt.Sprintf("%dm", 1000+i), "no room", t0.Add(time.Duration(i)*time.Second)))
			}
		})
	}
	wg.Wait()
	for _, n := range names {
		want := s.mem.byOwner(Owner{Namespace: "default", Name: n, UID: types.UID("uid-" + n)}.id())
		require.Eventually(t, func() bool {
			got := written(n)
			if len(got) != len(want) {
				return false
			}
			for uid, r := range want {
				if g, ok := got[uid]; !ok || g.Compare(r.Attempted) != Same {
					return false
				}
			}
			return true
		}, wait, tick, "the records of VPA %s written are those held", n)
	}
}
