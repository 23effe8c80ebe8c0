package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"

	"github.com/vpa-inplace/vpa-inplace/pkg/cachetrim"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
)

// wholeInformers are the informers a replica holds once for every span:
// cluster-scoped objects, and the pods bound to nodes of every namespace.
type wholeInformers struct {
	nodes      coreinformers.NodeInformer
	namespaces coreinformers.NamespaceInformer
	nodePods   coreinformers.PodInformer
}

// runUnit builds the controller of one span of shards, on informers that
// cache that span's namespaces only, and runs it until ctx is cancelled.
func runUnit(ctx context.Context, u *units, span shard.Span) error {
	b := u.base
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sel, err := shard.NewSelection(u.layout, []shard.Span{span}, u.lists)
	if err != nil {
		return err
	}
	f := newSpanInformers(b.kube, b.vpaClient, sel)
	vpaInformer := f.vpa.Autoscaling().V1().VerticalPodAutoscalers()
	recommendations, err := recommendation.NewClusterMemo(f.kube, b.minor)
	if err != nil {
		return err
	}
	resolver, err := target.NewClusterResolver(ctx, b.config, f.kube, vpaInformer.Informer())
	if err != nil {
		return err
	}
	// How long the work of the span's shards waits (client-go's workqueue
	// metrics of the controller's queues, under each shard of the span),
	// zeroed once the queues are shut down (ctrl.Close, deferred below).
	work := u.metrics.Work(span.Shards())
	defer work.Stop()
	// The records of the span's VPAs only: their ConfigMaps live beside
	// the others', in --records-namespace, each written by the replica
	// holding its VPA's shard.
	var ctrl *updater.Controller
	stores, err := b.newStores(vpaInformer.Lister(), storeScope{serves: sel.Has, shardSelector: sel.Selector()},
		func(owner records.Owner, uid types.UID) bool { return ctrl.RecordLive(owner, uid) },
		func(owner records.Owner, uid types.UID) bool { return ctrl.SafetyRecordLive(owner, uid) })
	if err != nil {
		return err
	}
	ctrl, err = updater.New(ctx, b.controllerConfig(), updater.Deps{
		Client:     b.kube,
		VPAClient:  b.vpaClient,
		Pods:       f.kube.Core().V1().Pods(),
		VPAs:       vpaInformer,
		ConfigMaps: b.killSwitch.informer,
		Namespaces: u.whole.namespaces,
		Jobs:       f.kube.Batch().V1().Jobs(),
		PDBs:       f.kube.Policy().V1().PodDisruptionBudgets(),
		Nodes:      u.whole.nodes,
		NodePods:   u.whole.nodePods,
		MinReady: disruption.MinReady{
			ReplicaSets:  f.kube.Apps().V1().ReplicaSets().Lister(),
			StatefulSets: f.kube.Apps().V1().StatefulSets().Lister(),
			DaemonSets:   f.kube.Apps().V1().DaemonSets().Lister(),
		},
		Resolver:      resolver,
		Calculator:    recommendations,
		Store:         stores.infeasible,
		MemoryRecords: stores.memory,
		SafetyRecords: stores.safety,
		JVMRecords:    stores.jvm,
		Checkpoints:   f.vpa.Autoscaling().V1().VerticalPodAutoscalerCheckpoints(),
		Usage:         b.memoryUsage,
		Metrics:       b.metrics,
		Recorder:      b.recorder,
		FeatureGate:   b.o.FeatureGate,
		Fence:         u.fence,
		NodeRoom:      u.sharedRoom(),
		QueueMetrics:  work.Queue,
	})
	if err != nil {
		return err
	}
	defer ctrl.Close()
	f.kube.Start(ctx.Done())
	f.vpa.Start(ctx.Done())
	defer func() {
		cancel()
		f.kube.Shutdown()
		f.vpa.Shutdown()
	}()
	logger := klog.FromContext(ctx)
	logger.Info("Working a span of shards", "selector", sel.Selector())
	// The controllers' and LimitRanges' caches first, as runWhole waits for
	// them; the span's shards are then reported synced once the controller
	// works.
	for typ, ok := range f.kube.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("the cache of %v did not sync", typ)
		}
	}
	shards := span.Shards()
	go func() {
		if wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			return ctrl.Working(), nil
		}) == nil {
			u.metrics.Synced(shards, true)
		}
	}()
	defer u.metrics.Synced(shards, false)
	err = ctrl.Run(ctx)
	if err == nil && ctx.Err() == nil {
		err = errors.New("the controller returned")
	}
	logger.Info("Stopped working a span of shards")
	return err
}

// spanInformers are the factories of one span's informers.
type spanInformers struct {
	kube informers.SharedInformerFactory
	vpa  vpainformers.SharedInformerFactory
}

// newSpanInformers returns factories whose informers of namespaced objects
// list and watch the selection's namespaces only (shard.Selection): every
// kind the controller, the target resolver and the recommendations read is
// registered here first, so that the factories hand these out.
func newSpanInformers(kube kubernetes.Interface, vpaClient vpaclientset.Interface, sel *shard.Selection) spanInformers {
	f := spanInformers{
		kube: informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(cachetrim.Transform)),
		vpa:  vpainformers.NewSharedInformerFactoryWithOptions(vpaClient, 0, vpainformers.WithTransform(cachetrim.Transform)),
	}
	for _, k := range kubeKinds(kube) {
		lw := sel.ListWatch(k.resource, kube, k.list, k.watch)
		obj := k.obj
		f.kube.InformerFor(obj, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
			return cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		})
	}
	for _, k := range vpaKinds(vpaClient) {
		lw := sel.ListWatch(k.resource, vpaClient, k.list, k.watch)
		obj := k.obj
		f.vpa.InformerFor(obj, func(vpaclientset.Interface, time.Duration) cache.SharedIndexInformer {
			return cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		})
	}
	return f
}

// kind is one kind of namespaced object a span caches.
type kind struct {
	obj      runtime.Object
	resource string
	list     shard.ListFunc
	watch    shard.WatchFunc
}

func lw[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error),
	w func(context.Context, metav1.ListOptions) (watch.Interface, error)) (shard.ListFunc, shard.WatchFunc) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) }, w
}

// kubeKinds are the namespaced kinds of the Kubernetes API a span caches:
// its pods (those not terminated), PodDisruptionBudgets, Jobs, LimitRanges,
// and the workloads the target resolver reads.
func kubeKinds(kube kubernetes.Interface) []kind {
	all := metav1.NamespaceAll
	pods := kube.CoreV1().Pods(all)
	var kinds []kind
	add := func(obj runtime.Object, resource string, list shard.ListFunc, w shard.WatchFunc) {
		kinds = append(kinds, kind{obj: obj, resource: resource, list: list, watch: w})
	}
	pl, pw := lw(func(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
		notTerminal(&o)
		return pods.List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		notTerminal(&o)
		return pods.Watch(ctx, o)
	})
	add(&corev1.Pod{}, "pods", pl, pw)
	l, w := lw(kube.PolicyV1().PodDisruptionBudgets(all).List, kube.PolicyV1().PodDisruptionBudgets(all).Watch)
	add(&policyv1.PodDisruptionBudget{}, "poddisruptionbudgets", l, w)
	l, w = lw(kube.BatchV1().Jobs(all).List, kube.BatchV1().Jobs(all).Watch)
	add(&batchv1.Job{}, "jobs", l, w)
	l, w = lw(kube.BatchV1().CronJobs(all).List, kube.BatchV1().CronJobs(all).Watch)
	add(&batchv1.CronJob{}, "cronjobs", l, w)
	l, w = lw(kube.CoreV1().LimitRanges(all).List, kube.CoreV1().LimitRanges(all).Watch)
	add(&corev1.LimitRange{}, "limitranges", l, w)
	l, w = lw(kube.CoreV1().ReplicationControllers(all).List, kube.CoreV1().ReplicationControllers(all).Watch)
	add(&corev1.ReplicationController{}, "replicationcontrollers", l, w)
	l, w = lw(kube.AppsV1().Deployments(all).List, kube.AppsV1().Deployments(all).Watch)
	add(&appsv1.Deployment{}, "deployments", l, w)
	l, w = lw(kube.AppsV1().ReplicaSets(all).List, kube.AppsV1().ReplicaSets(all).Watch)
	add(&appsv1.ReplicaSet{}, "replicasets", l, w)
	l, w = lw(kube.AppsV1().StatefulSets(all).List, kube.AppsV1().StatefulSets(all).Watch)
	add(&appsv1.StatefulSet{}, "statefulsets", l, w)
	l, w = lw(kube.AppsV1().DaemonSets(all).List, kube.AppsV1().DaemonSets(all).Watch)
	add(&appsv1.DaemonSet{}, "daemonsets", l, w)
	return kinds
}

// vpaKinds are the VPA API's kinds a span caches.
func vpaKinds(vpaClient vpaclientset.Interface) []kind {
	all := metav1.NamespaceAll
	v := vpaClient.AutoscalingV1()
	l, w := lw(v.VerticalPodAutoscalers(all).List, v.VerticalPodAutoscalers(all).Watch)
	cl, cw := lw(v.VerticalPodAutoscalerCheckpoints(all).List, v.VerticalPodAutoscalerCheckpoints(all).Watch)
	return []kind{
		{obj: &vpatypes.VerticalPodAutoscaler{}, resource: "verticalpodautoscalers", list: l, watch: w},
		{obj: &vpatypes.VerticalPodAutoscalerCheckpoint{}, resource: "verticalpodautoscalercheckpoints", list: cl, watch: cw},
	}
}
