package updater

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"
	vpaclient "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/typed/autoscaling.k8s.io/v1"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// BenchmarkLoadRecords is the updater's first Load as a new leader, with
// the controller's own Live check, of 1,000 VPAs of 10 recorded pods each
// and of one VPA of 10,000 recorded pods, every pod with 32
// ownerReferences to objects that do not exist (issue #32, item 2: each
// record cost an owner walk, up to 32 reads; 1,000 such pods took 11
// minutes). It prints the time of one Load, the records kept and the owner
// lookups made (lookups/op).
func BenchmarkLoadRecords(b *testing.B) {
	for _, bc := range []struct {
		name       string
		vpas, pods int
	}{
		{"vpas=1000,pods=10", 1000, 10},
		{"vpas=1,pods=10000", 1, 10000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := klog.NewContext(context.Background(), klog.Background().V(1))
			resolver := &lookupResolver{Resolver: labelResolver{vpas: func(string) []*vpatypes.VerticalPodAutoscaler { return nil }}}
			ctrl, vpaList, configMaps := hostileRecords(b, ctx, resolver, bc.vpas, bc.pods)
			var kept int
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				store, err := records.NewConfigMapStore(listedConfigMaps{list: configMaps}, listedVPAs{list: vpaList}, ctrl.vpas,
					records.ConfigMapStoreConfig{Namespace: systemNamespace, Store: records.StoreInfeasible, Live: ctrl.RecordLive,
						Now: func() time.Time { return t0 }})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := store.Load(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				kept = store.Len()
				b.StartTimer()
			}
			b.ReportMetric(float64(kept), "records-kept")
			b.ReportMetric(float64(resolver.calls.Load())/float64(b.N), "lookups/op")
			if kept != bc.vpas*bc.pods {
				b.Fatalf("kept %d records of %d", kept, bc.vpas*bc.pods)
			}
		})
	}
}

// hostileRecords returns a controller whose pod cache holds vpas x pods
// pods, each with 32 ownerReferences to objects that do not exist, and the
// VPAs and records ConfigMaps a Load reads (one NodeCapacity record a pod).
func hostileRecords(b *testing.B, ctx context.Context, resolver Resolver, vpas, pods int) (*Controller, *vpatypes.VerticalPodAutoscalerList, *corev1.ConfigMapList) {
	b.Helper()
	kube := kubefake.NewClientset()
	vpaClient := vpafake.NewSimpleClientset()
	podInformer := informers.NewSharedInformerFactory(kube, 0).Core().V1().Pods()
	vpaInformer := vpainformers.NewSharedInformerFactory(vpaClient, 0).Autoscaling().V1().VerticalPodAutoscalers()
	gate := features.NewFeatureGate()
	ctrl, err := New(ctx, Config{}, Deps{
		Client: kube, VPAClient: vpaClient, Pods: podInformer, VPAs: vpaInformer, Resolver: resolver,
		Calculator: recommendation.NewCalculator(limitrange.NewNoopLimitsCalculator()), Store: records.NewInMemoryStore(),
		Recorder: record.NewFakeRecorder(1), FeatureGate: gate,
	})
	if err != nil {
		b.Fatal(err)
	}
	vpaList := &vpatypes.VerticalPodAutoscalerList{}
	configMaps := &corev1.ConfigMapList{}
	refs := make([]metav1.OwnerReference, 32)
	for i := range refs {
		refs[i] = metav1.OwnerReference{APIVersion: "example.com/v1", Kind: fmt.Sprintf("Thing%d", i), Name: fmt.Sprintf("missing-%d", i),
			UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))}
	}
	for v := range vpas {
		vpa := testvpa.New(fmt.Sprintf("vpa-%d", v)).InPlace().Obj()
		vpa.Namespace = fmt.Sprintf("ns-%d", v%50)
		vpa.UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-000000000000", v))
		vpaList.Items = append(vpaList.Items, *vpa)
		if err := vpaInformer.Informer().GetIndexer().Add(vpa); err != nil {
			b.Fatal(err)
		}
		owner := records.Owner{Namespace: vpa.Namespace, Name: vpa.Name, UID: vpa.UID}
		recs := make(map[types.UID]*records.Record, pods)
		for p := range pods {
			uid := types.UID(fmt.Sprintf("%08x-%04x-4000-8000-%012x", v, p&0xffff, p))
			pod := testpod.New(fmt.Sprintf("pod-%d-%d", v, p)).Namespace(vpa.Namespace).UID(string(uid)).Container("app", "100m", "100Mi").Obj()
			pod.OwnerReferences = refs
			if err := podInformer.Informer().GetIndexer().Add(pod); err != nil {
				b.Fatal(err)
			}
			recs[uid] = &records.Record{Kind: records.KindNodeCapacity, Attempted: resources.Resources{"app": {Requests: testpod.List("8", "100Mi")}},
				Message: "node didn't have enough allocatable resources: cpu", RecordedAt: t0.Add(-time.Duration(p) * time.Second)}
		}
		value, left, err := records.EncodeCompact(recs, records.DefaultMaxCompactBytes)
		if err != nil || len(left) > 0 {
			b.Fatalf("encoding: %d left out, %v", len(left), err)
		}
		configMaps.Items = append(configMaps.Items, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: records.ConfigMapName(records.StoreInfeasible, owner.UID), Namespace: systemNamespace,
				Labels: map[string]string{records.LabelStore: records.StoreInfeasible},
				Annotations: map[string]string{records.AnnotationVPANamespace: owner.Namespace, records.AnnotationVPAName: owner.Name,
					records.AnnotationVPAUID: string(owner.UID)},
			},
			Data: map[string]string{records.ConfigMapDataKey: value},
		})
	}
	return ctrl, vpaList, configMaps
}

// listedConfigMaps serves a prebuilt list, so that the benchmark measures
// the store, not a fake clientset's copies.
type listedConfigMaps struct {
	corev1client.ConfigMapInterface
	list *corev1.ConfigMapList
}

func (l listedConfigMaps) ConfigMaps(string) corev1client.ConfigMapInterface { return l }

func (l listedConfigMaps) List(context.Context, metav1.ListOptions) (*corev1.ConfigMapList, error) {
	return l.list, nil
}

// Create answers Load's check (CheckWritable).
func (l listedConfigMaps) Create(_ context.Context, cm *corev1.ConfigMap, _ metav1.CreateOptions) (*corev1.ConfigMap, error) {
	return cm, nil
}

// listedVPAs serves a prebuilt list of VPAs.
type listedVPAs struct {
	vpaclient.VerticalPodAutoscalerInterface
	list *vpatypes.VerticalPodAutoscalerList
}

func (l listedVPAs) VerticalPodAutoscalers(string) vpaclient.VerticalPodAutoscalerInterface { return l }

func (l listedVPAs) List(context.Context, metav1.ListOptions) (*vpatypes.VerticalPodAutoscalerList, error) {
	return l.list, nil
}
