package records

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

const recordsNamespace = "vpa-inplace-system"

func recordsConfigMap(store string, owner Owner, records map[types.UID]*Record) *corev1.ConfigMap {
	value, _, err := EncodeCompact(records, DefaultMaxCompactBytes)
	if err != nil {
		panic(err)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ConfigMapName(store, owner.UID), Namespace: recordsNamespace,
			Labels:      map[string]string{LabelStore: store},
			Annotations: map[string]string{AnnotationVPANamespace: owner.Namespace, AnnotationVPAName: owner.Name, AnnotationVPAUID: string(owner.UID)},
		},
		Data: map[string]string{ConfigMapDataKey: value},
	}
}

func TestConfigMapStoreRecordsOfTenThousandPodsSurviveARestart(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	s, stop := f.startCM(ConfigMapStoreConfig{})
	for i := range 10000 {
		s.Put(webVPA, uuid(0, i), rec(KindNodeCapacity, "8", "0/1 nodes are available: 1 Insufficient cpu.", t0.Add(time.Duration(i)*time.Second)))
	}
	require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 10000 }, wait, tick)
	stop()

	// A new process: every record is back, so not one of these resizes is
	// sent again.
	again, _ := f.startCM(ConfigMapStoreConfig{})
	assert.Equal(t, 10000, again.Len())
	for i := range 10000 {
		r, ok := again.Get(uuid(0, i))
		require.True(t, ok, "record %d", i)
		require.Equal(t, NotLower, r.Compare(rec(KindNodeCapacity, "9", "", t0).Attempted))
	}
	assert.Equal(t, []string{ConfigMapName(StoreInfeasible, webVPA.UID)}, f.configMaps(), "one ConfigMap for the VPA")
	assert.Empty(t, f.patches(), "the VPA is not written")
}

// Memory records carry each pod's usage in their message: an attempt per
// pod. 1,000 of them are all back after a restart (issue #32, item 3: 256
// were).
func TestConfigMapStoreMemoryRecordsOfAThousandPodsSurviveARestart(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	s, stop := f.startCM(ConfigMapStoreConfig{Store: StoreMemory})
	for i := range 1000 {
		s.Put(webVPA, uuid(0, i), memoryRecord(i))
	}
	require.Eventually(t, func() bool { return len(f.cmRecordsOf(StoreMemory, webVPA.UID)) == 1000 }, wait, tick)
	stop()

	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	again, _ := f.startCM(ConfigMapStoreConfig{Store: StoreMemory, Metrics: metrics})
	assert.Equal(t, 1000, again.Len())
	assert.Zero(t, testutil.CollectAndCount(metrics.dropped), "nothing dropped")
}

func TestConfigMapStoreMovesTheAnnotationsRecordsIntoItsConfigMap(t *testing.T) {
	old := map[types.UID]*Record{"pod-a": rec(KindNodeCapacity, "8", "no room", t0), "pod-b": rec(KindInfeasible, "4", "", t0)}
	f := newCMFixture(t, nil, annotated("web", old))
	s, stop := f.startCM(ConfigMapStoreConfig{})
	assert.Equal(t, 2, s.Len(), "the annotation's records are held at once")
	require.Eventually(t, func() bool { return f.annotation("web") == "" }, wait, tick, "the annotation is removed")
	got := f.cmRecords(webVPA.UID)
	require.Len(t, got, 2, "after its records are in the ConfigMap")
	stop()
	patches := f.patches()
	require.Len(t, patches, 1)
	assert.JSONEq(t, `{"metadata":{"uid":"uid-web","annotations":{"`+AnnotationKey+`":null}}}`, patches[0], "guarded by the VPA's UID")

	again, _ := f.startCM(ConfigMapStoreConfig{})
	assert.Equal(t, 2, again.Len(), "read back from the ConfigMap")
}

func TestConfigMapStoreDeletesTheConfigMapsOfGoneVPAs(t *testing.T) {
	gone := Owner{Namespace: "default", Name: "gone", UID: "uid-gone"}
	elsewhere := Owner{Namespace: "other", Name: "db", UID: "uid-db"}
	f := newCMFixture(t, []runtime.Object{
		recordsConfigMap(StoreInfeasible, webVPA, map[types.UID]*Record{"pod-a": rec(KindNodeCapacity, "8", "", t0)}),
		recordsConfigMap(StoreInfeasible, gone, map[types.UID]*Record{"pod-g": rec(KindNodeCapacity, "8", "", t0)}),
		recordsConfigMap(StoreInfeasible, elsewhere, map[types.UID]*Record{"pod-d": rec(KindNodeCapacity, "8", "", t0)}),
		recordsConfigMap(StoreMemory, gone, map[types.UID]*Record{"pod-g": rec(KindNodeCapacity, "8", "", t0)}),
	}, vpa("web"))
	s, _ := f.startCM(ConfigMapStoreConfig{VPANamespace: "default"})
	assert.Equal(t, 1, s.Len(), "only the live VPA's record is held")
	assert.ElementsMatch(t, []string{
		ConfigMapName(StoreInfeasible, webVPA.UID),
		ConfigMapName(StoreInfeasible, elsewhere.UID), // not this updater's namespace
		ConfigMapName(StoreMemory, gone.UID),          // not this store
	}, f.configMaps(), "Load deletes the ConfigMap of a VPA that is gone")

	ignoring, _ := f.startCM(ConfigMapStoreConfig{IgnoredNamespaces: []string{"default"}})
	assert.Zero(t, ignoring.Len(), "an updater ignoring a namespace holds none of its records")
	assert.Contains(t, f.configMaps(), ConfigMapName(StoreInfeasible, webVPA.UID), "and deletes none of its ConfigMaps")

	s.ForgetOwner(webVPA)
	require.Eventually(t, func() bool { return f.cmRecords(webVPA.UID) == nil }, wait, tick, "and so does ForgetOwner")
}

// A replica serving some namespaces' shards loads the records of their VPAs
// only, and leaves the ConfigMaps of the others alone: those of live VPAs,
// and those of VPAs that are gone, which the replica serving their
// namespace deletes.
func TestConfigMapStoreOfSomeShardsLeavesTheOthersRecordsAlone(t *testing.T) {
	db := vpa("db")
	db.Namespace = "other"
	dbVPA := Owner{Namespace: "other", Name: "db", UID: db.UID}
	goneHere := Owner{Namespace: "default", Name: "gone", UID: "uid-gone"}
	goneThere := Owner{Namespace: "other", Name: "gone", UID: "uid-gone-there"}
	f := newCMFixture(t, []runtime.Object{
		recordsConfigMap(StoreInfeasible, webVPA, map[types.UID]*Record{"pod-a": rec(KindNodeCapacity, "8", "", t0)}),
		recordsConfigMap(StoreInfeasible, dbVPA, map[types.UID]*Record{"pod-d": rec(KindNodeCapacity, "8", "", t0)}),
		recordsConfigMap(StoreInfeasible, goneHere, map[types.UID]*Record{"pod-g": rec(KindNodeCapacity, "8", "", t0)}),
		recordsConfigMap(StoreInfeasible, goneThere, map[types.UID]*Record{"pod-h": rec(KindNodeCapacity, "8", "", t0)}),
	}, vpa("web"), db)
	var selectors []string
	var mu sync.Mutex
	f.client.PrependReactor("list", "verticalpodautoscalers", func(action clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		selectors = append(selectors, action.(clienttesting.ListActionImpl).GetListOptions().ShardSelector)
		return false, nil, nil
	})
	const selector = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"
	s, _ := f.startCM(ConfigMapStoreConfig{Serves: func(ns string) bool { return ns == "default" }, ShardSelector: selector})
	assert.Equal(t, 1, s.Len())
	_, ok := s.Get("pod-a")
	assert.True(t, ok, "the record of a VPA served")
	_, ok = s.Get("pod-d")
	assert.False(t, ok, "the record of a VPA another replica serves")
	assert.ElementsMatch(t, []string{
		ConfigMapName(StoreInfeasible, webVPA.UID),
		ConfigMapName(StoreInfeasible, dbVPA.UID),
		ConfigMapName(StoreInfeasible, goneThere.UID),
	}, f.configMaps(), "only the ConfigMap of a gone VPA of a namespace served is deleted")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, selectors)
	for _, sel := range selectors {
		assert.Equal(t, selector, sel)
	}
}

func TestConfigMapStoreDeletesTheConfigMapWhenNoRecordIsLeft(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	s, _ := f.startCM(ConfigMapStoreConfig{})
	s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "", t0))
	require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 1 }, wait, tick)
	s.Delete("pod-a")
	require.Eventually(t, func() bool { return len(f.configMaps()) == 0 }, wait, tick)
}

// With an owner (the updater's Lease, --records-owner), every ConfigMap is
// written owned by it, the one written before without an owner included, so
// that deleting the Lease (helm uninstall, kubectl delete -k) has the
// garbage collector delete every record.
func TestConfigMapStoreWritesTheOwnerReference(t *testing.T) {
	owner := &metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "vpa-inplace-updater", UID: "lease-uid"}
	ownerOf := func(f *cmFixture, uid types.UID) []metav1.OwnerReference {
		cm, err := f.kube.CoreV1().ConfigMaps(recordsNamespace).Get(context.Background(), ConfigMapName(StoreInfeasible, uid), metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return cm.OwnerReferences
	}
	t.Run("created", func(t *testing.T) {
		f := newCMFixture(t, nil, vpa("web"))
		s, _ := f.startCM(ConfigMapStoreConfig{Owner: owner})
		s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "", t0))
		require.Eventually(t, func() bool { return len(ownerOf(f, webVPA.UID)) == 1 }, wait, tick)
		assert.Equal(t, []metav1.OwnerReference{*owner}, ownerOf(f, webVPA.UID))
	})
	t.Run("written before without an owner: updated", func(t *testing.T) {
		old := recordsConfigMap(StoreInfeasible, webVPA, map[types.UID]*Record{"pod-a": rec(KindNodeCapacity, "8", "", t0)})
		f := newCMFixture(t, []runtime.Object{old}, vpa("web"))
		s, _ := f.startCM(ConfigMapStoreConfig{Owner: owner})
		s.Put(webVPA, "pod-b", rec(KindNodeCapacity, "8", "", t0))
		require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 2 }, wait, tick)
		assert.Equal(t, []metav1.OwnerReference{*owner}, ownerOf(f, webVPA.UID))
	})
	t.Run("no owner", func(t *testing.T) {
		f := newCMFixture(t, nil, vpa("web"))
		s, _ := f.startCM(ConfigMapStoreConfig{})
		s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "", t0))
		require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 1 }, wait, tick)
		assert.Empty(t, ownerOf(f, webVPA.UID))
	})
}

// A VPA deleted and created again under the same name is another VPA: the
// new one holds none of the old one's records, in memory or in its
// ConfigMap, not even a record a worker put for the old one after it was
// forgotten (issue #32, item 6: the records were held by namespace/name,
// and the new VPA's ConfigMap got them all).
func TestConfigMapStoreANewVPAOfTheSameNameStartsAfresh(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	s, _ := f.startCM(ConfigMapStoreConfig{})
	s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "", t0))
	require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 1 }, wait, tick)

	f.deleteVPA("web")
	s.ForgetOwner(webVPA)
	// A worker that resolved the old VPA just before it went.
	s.Put(webVPA, "pod-c", rec(KindNodeCapacity, "8", "", t0))

	renewed := vpa("web")
	renewed.UID = "uid-web-2"
	_, err := f.client.AutoscalingV1().VerticalPodAutoscalers("default").Create(context.Background(), renewed, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, err := f.lister.VerticalPodAutoscalers("default").Get("web")
		return err == nil && v.UID == renewed.UID
	}, wait, tick)
	renewedOwner := Owner{Namespace: "default", Name: "web", UID: renewed.UID}
	s.Put(renewedOwner, "pod-b", rec(KindNodeCapacity, "8", "", t0))

	require.Eventually(t, func() bool { return len(f.cmRecords(renewed.UID)) == 1 }, wait, tick)
	waitWritten(t, &s.durable, webVPA) // the old VPA's: what else is queued is written
	assert.Equal(t, []string{ConfigMapName(StoreInfeasible, renewed.UID)}, f.configMaps(), "no ConfigMap is left for the old VPA")
	assert.Contains(t, f.cmRecords(renewed.UID), types.UID("pod-b"), "the new VPA's ConfigMap holds its own record only")
	for _, uid := range []types.UID{"pod-a", "pod-c"} {
		_, held := s.GetFor(renewedOwner, uid)
		assert.False(t, held, "%s: a record of the old VPA is not the new one's", uid)
	}
}

// Workers put records for a VPA while it is deleted and forgotten: once
// they stop, no ConfigMap is left for it (issue #32, item 6: a record put
// after ForgetOwner created the ConfigMap again, and nothing deleted it
// until the next leader's Load).
func TestConfigMapStoreRecordsPutWhileTheVPAIsDeletedLeaveNoConfigMap(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	s, _ := f.startCM(ConfigMapStoreConfig{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var puts atomic.Int32
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s.Put(webVPA, types.UID(fmt.Sprintf("pod-%d-%d", w, i%20)), rec(KindNodeCapacity, fmt.Sprintf("%dm", 1000+i%7), "no room", t0))
				puts.Add(1)
				time.Sleep(time.Millisecond)
			}
		})
	}
	require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) > 0 }, wait, tick)
	f.deleteVPA("web")
	s.ForgetOwner(webVPA)
	// The workers go on putting for a while.
	forgotten := puts.Load()
	require.Eventually(t, func() bool { return puts.Load() >= forgotten+200 }, wait, tick)
	close(stop)
	wg.Wait()
	require.Eventually(t, func() bool { return len(f.configMaps()) == 0 }, wait, tick, "the ConfigMap of the deleted VPA is gone")
	waitWritten(t, &s.durable, webVPA)
	assert.Empty(t, f.configMaps(), "and stays gone")
}

func TestConfigMapStoreLoadKeepsOnlyWellFormedRecordsOfTheVPAsOwnPods(t *testing.T) {
	value := compactDocOf(goodAttempt, "pod-a:1777629600 pod-foreign:1777629600 pod-b:4070908800 not/a/uid:1")
	cm := recordsConfigMap(StoreInfeasible, webVPA, nil)
	cm.Data = map[string]string{ConfigMapDataKey: value}
	f := newCMFixture(t, []runtime.Object{cm}, vpa("web"))
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	require.NoError(t, err)
	s, _ := f.startCM(ConfigMapStoreConfig{
		Metrics: metrics, Now: func() time.Time { return t0 },
		Live: liveIn(map[string][]types.UID{"default": {"pod-a", "pod-b"}}),
	})
	_, ok := s.Get("pod-a")
	assert.True(t, ok)
	assert.Equal(t, 1, s.Len())
	for reason, want := range map[DropReason]float64{DropNotOwned: 1, DropFuture: 1, DropBadUID: 1} {
		assert.Equal(t, want, testutil.ToFloat64(metrics.dropped.WithLabelValues(StoreInfeasible, string(reason))), reason)
	}
	require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 1 }, wait, tick, "rewritten with what was kept")
}

func TestConfigMapStoreRetriesFailedWrites(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	failures := 0
	var mu sync.Mutex
	f.kube.PrependReactor("create", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures < 2 && !dryRun(a) {
			failures++
			return true, nil, apierrors.NewInternalError(fmt.Errorf("etcd is slow"))
		}
		return false, nil, nil
	})
	metrics, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	s, _ := f.startCM(ConfigMapStoreConfig{Metrics: metrics})
	s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "", t0))
	require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 1 }, wait, tick)
	assert.Equal(t, 2.0, testutil.ToFloat64(metrics.failures.WithLabelValues(StoreInfeasible, WriteOther)))
}

func TestConfigMapStoreConcurrentWorkersEndWithTheRecordsHeld(t *testing.T) {
	f := newCMFixture(t, nil, concurrentVPAs()...)
	s, _ := f.startCM(ConfigMapStoreConfig{})
	checkConcurrentWorkers(t, &s.durable, func(n string) map[types.UID]*Record { return f.cmRecords(types.UID("uid-" + n)) })
}

func TestNewConfigMapStoreRefusesABadConfig(t *testing.T) {
	_, err := NewConfigMapStore(nil, nil, nil, ConfigMapStoreConfig{Store: StoreInfeasible})
	require.ErrorContains(t, err, "no namespace")
	_, err = NewConfigMapStore(nil, nil, nil, ConfigMapStoreConfig{Namespace: "ns", Store: "Not A Label"})
	require.Error(t, err)
}

// Issue #32, item 5: with the records namespace missing, or its ConfigMaps
// refused, Load loaded nothing and said nothing, the updater became Ready
// and decided, and every write failed from then on. Load fails now, saying
// what to do; readiness reports it, and nothing is decided.
func TestConfigMapStoreLoadRefusesANamespaceItCannotWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		serve  func(*kubefake.Clientset)
		wantIs bool
		want   string
	}{
		{"the namespace does not exist", func(kube *kubefake.Clientset) { serveConfigMaps(kube, nil) }, true,
			`namespace "vpa-inplace-system" does not exist; create it, or set --records-namespace`},
		{"the Role does not allow it", func(kube *kubefake.Clientset) {
			serveConfigMaps(kube, []string{recordsNamespace})
			kube.PrependReactor("create", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(configMapsResource, "", errors.New(`User "system:serviceaccount:vpa-inplace-system:vpa-inplace-updater" cannot create resource "configmaps"`))
			})
		}, true, `ConfigMaps cannot be created in namespace "vpa-inplace-system"`},
		{"the API server does not answer: no verdict, retried", func(kube *kubefake.Clientset) {
			serveConfigMaps(kube, []string{recordsNamespace})
			kube.PrependReactor("create", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("apiserver starting")
			})
		}, false, "checking that records can be written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStoreFixture(t, vpa("web"))
			kube := kubefake.NewClientset()
			tc.serve(kube)
			s, err := NewConfigMapStore(kube.CoreV1(), f.client.AutoscalingV1(), f.lister, ConfigMapStoreConfig{Namespace: recordsNamespace, Store: StoreInfeasible})
			require.NoError(t, err)
			err = s.Load(f.ctx)
			require.Error(t, err)
			assert.Equal(t, tc.wantIs, errors.Is(err, ErrNotWritable))
			assert.ErrorContains(t, err, tc.want)
			assert.Equal(t, err, s.Loaded(), "readiness says why")
		})
	}
	t.Run("a namespace that exists and is writable: nothing created", func(t *testing.T) {
		f := newCMFixture(t, nil, vpa("web"))
		f.startCM(ConfigMapStoreConfig{})
		assert.Empty(t, f.configMaps(), "the check is a dry run")
	})
}

// While a VPA's records cannot be written, WriteError says why and the
// gauge counts them; both clear once a write succeeds.
func TestConfigMapStoreSaysWhileRecordsAreNotDurable(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"), vpa("db"))
	var refuse atomic.Bool
	refuse.Store(true)
	f.kube.PrependReactor("create", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() && !dryRun(a) {
			return true, nil, apierrors.NewForbidden(configMapsResource, "", errors.New("denied by policy"))
		}
		return false, nil, nil
	})
	metrics, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	s, _ := f.startCM(ConfigMapStoreConfig{Metrics: metrics})
	dbVPA := Owner{Namespace: "default", Name: "db", UID: "uid-db"}
	s.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "", t0))
	s.Put(webVPA, "pod-b", rec(KindNodeCapacity, "8", "", t0))
	failing := func() float64 {
		return testutil.ToFloat64(metrics.notDurable.WithLabelValues(StoreInfeasible, NotDurableWriteFailing))
	}
	require.Eventually(t, func() bool { return s.WriteError(webVPA) != nil && failing() == 2 }, wait, tick)
	assert.ErrorContains(t, s.WriteError(webVPA), "denied by policy")
	assert.NoError(t, s.WriteError(dbVPA), "a VPA without records is not concerned")

	refuse.Store(false)
	require.Eventually(t, func() bool { return s.WriteError(webVPA) == nil && failing() == 0 }, wait, tick, "the retry succeeds")
	assert.Len(t, f.cmRecords(webVPA.UID), 2)
}
