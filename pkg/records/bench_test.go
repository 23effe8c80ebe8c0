package records

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclient "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/typed/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"
)

// listedVPAs serves a prebuilt list, so that a benchmark of Load measures
// the store, not a fake clientset's copies.
type listedVPAs struct {
	vpaclient.VerticalPodAutoscalerInterface
	list *vpatypes.VerticalPodAutoscalerList
}

func (l listedVPAs) List(context.Context, metav1.ListOptions) (*vpatypes.VerticalPodAutoscalerList, error) {
	return l.list, nil
}

type listedGetter struct{ l listedVPAs }

func (g listedGetter) VerticalPodAutoscalers(string) vpaclient.VerticalPodAutoscalerInterface {
	return g.l
}

// uuid returns a UID shaped like the API server's.
func uuid(vpa, pod int) types.UID {
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", vpa, pod&0xffff, pod>>16&0xfff, vpa&0xfff, pod))
}

// realisticVPAs returns VPAs whose annotations hold the records of pods
// pods, of two attempts (a workload's pods fail alike), as the store
// writes them.
func realisticVPAs(b *testing.B, vpas, pods int) *vpatypes.VerticalPodAutoscalerList {
	list := &vpatypes.VerticalPodAutoscalerList{}
	for v := range vpas {
		records := realisticRecords(v, pods)
		value, _, err := EncodeAnnotation(records, DefaultMaxAnnotationBytes)
		if err != nil {
			b.Fatal(err)
		}
		obj := vpa(fmt.Sprintf("vpa-%d", v))
		obj.Namespace = fmt.Sprintf("ns-%d", v%50)
		obj.UID = types.UID(fmt.Sprintf("uid-vpa-%d", v))
		obj.Annotations = map[string]string{AnnotationKey: value}
		list.Items = append(list.Items, *obj)
	}
	return list
}

// realisticRecords returns the records of the pods of VPA v, of two
// attempts (a workload's pods fail alike).
func realisticRecords(v, pods int) map[types.UID]*Record {
	records := make(map[types.UID]*Record, pods)
	for p := range pods {
		r := rec(KindNodeCapacity, "8", "Node didn't have enough capacity: cpu, requested: 8000, capacity: 4000", t0.Add(-time.Duration(p)*time.Second))
		if p%2 == 1 {
			r = rec(KindInfeasible, "6", `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`, t0.Add(-time.Duration(p)*time.Second))
		}
		records[uuid(v, p)] = r
	}
	return records
}

// BenchmarkLoad prints the time of one Load and the heap the loaded records
// hold (heap-MiB), for 1,000 VPAs of 10 pods each, for one VPA of 10,000
// pods, whose annotation holds what fits in DefaultMaxAnnotationBytes
// (records-kept), and for 1,000 VPAs whose full annotations name no pod of
// theirs.
func BenchmarkLoad(b *testing.B) {
	for _, bc := range []struct {
		name       string
		vpas, pods int
		owned      bool
	}{
		{"vpas=1000,pods=10", 1000, 10, true},
		{"vpas=1,pods=10000", 1, 10000, true},
		// Finding 2 of issue #26: every VPA's annotation full of UIDs that
		// are no pod of it.
		{"vpas=1000,full-annotations-of-made-up-uids", 1000, 2000, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			list := realisticVPAs(b, bc.vpas, bc.pods)
			live := func(Owner, types.UID) bool { return bc.owned }
			lister := vpalisters.NewVerticalPodAutoscalerLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
			ctx := klog.NewContext(context.Background(), klog.Background().V(1))
			measureLoad(b, ctx, func() loadable {
				return NewVPAStore(listedGetter{listedVPAs{list: list}}, lister, VPAStoreConfig{Live: live, Now: func() time.Time { return t0.Add(time.Hour) }})
			})
		})
	}
}

type loadable interface {
	Load(context.Context) error
	Len() int
	shutDown()
}

func (s *durable) shutDown() { s.queue.ShutDown() }

// measureLoad runs Load on a new store b.N times and reports the heap the
// loaded records hold and how many were kept.
func measureLoad(b *testing.B, ctx context.Context, newStore func() loadable) {
	var heap float64
	var kept int
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s := newStore()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		if err := s.Load(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
		kept = s.Len()
		s.shutDown()
		b.StartTimer()
	}
	b.ReportMetric(heap, "heap-MiB")
	b.ReportMetric(float64(kept), "records-kept")
}

// listedConfigMaps serves a prebuilt list of ConfigMaps.
type listedConfigMaps struct {
	corev1client.ConfigMapInterface
	list *corev1.ConfigMapList
}

func (l listedConfigMaps) List(context.Context, metav1.ListOptions) (*corev1.ConfigMapList, error) {
	return l.list, nil
}

// Create answers Load's check (CheckWritable).
func (l listedConfigMaps) Create(_ context.Context, cm *corev1.ConfigMap, _ metav1.CreateOptions) (*corev1.ConfigMap, error) {
	return cm, nil
}

type listedConfigMapsGetter struct{ l listedConfigMaps }

func (g listedConfigMapsGetter) ConfigMaps(string) corev1client.ConfigMapInterface { return g.l }

// BenchmarkConfigMapLoad is BenchmarkLoad for ConfigMapStore: the time of
// one Load and the heap held for 1,000 VPAs of 10 pods each and for one VPA
// of 10,000 pods, every record in a ConfigMap.
func BenchmarkConfigMapLoad(b *testing.B) {
	for _, bc := range []struct {
		name       string
		vpas, pods int
	}{
		{"vpas=1000,pods=10", 1000, 10},
		{"vpas=1,pods=10000", 1, 10000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			vpas := realisticVPAs(b, bc.vpas, 0)
			configMaps := &corev1.ConfigMapList{}
			for v := range vpas.Items {
				vpa := &vpas.Items[v]
				vpa.Annotations = nil
				records := realisticRecords(v, bc.pods)
				owner := Owner{Namespace: vpa.Namespace, Name: vpa.Name, UID: vpa.UID}
				configMaps.Items = append(configMaps.Items, *recordsConfigMap(StoreInfeasible, owner, records))
			}
			lister := vpalisters.NewVerticalPodAutoscalerLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
			ctx := klog.NewContext(context.Background(), klog.Background().V(1))
			live := func(Owner, types.UID) bool { return true }
			measureLoad(b, ctx, func() loadable {
				s, err := NewConfigMapStore(listedConfigMapsGetter{listedConfigMaps{list: configMaps}}, listedGetter{listedVPAs{list: vpas}}, lister,
					ConfigMapStoreConfig{Namespace: recordsNamespace, Store: StoreInfeasible, Live: live, Now: func() time.Time { return t0.Add(time.Hour) }})
				if err != nil {
					b.Fatal(err)
				}
				return s
			})
		})
	}
}

// BenchmarkDecodeAnnotation prints the time to decode one annotation of the
// largest size read, well formed or hostile.
func BenchmarkDecodeAnnotation(b *testing.B) {
	good := realisticVPAs(b, 1, 5000).Items[0].Annotations[AnnotationKey]
	huge := doc(`{"kind":"Infeasible","resources":{"c":{"requests":{"cpu":"1e-99999999","memory":"1e-9999999"}}}}`, `"a":{"attempt":0}`)
	for _, bc := range []struct{ name, value string }{
		{fmt.Sprintf("full-%dB", len(good)), good},
		{"huge-exponents", huge},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := DecodeAnnotation(bc.value, DecodeOptions{Now: t0}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
