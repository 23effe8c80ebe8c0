package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"

	"github.com/vpa-inplace/vpa-inplace/pkg/cachetrim"
	"github.com/vpa-inplace/vpa-inplace/pkg/eventsink"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/server"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
)

// UserAgent identifies the updater to the API server.
const UserAgent = "vpa-inplace-updater"

// Run runs the updater until ctx is cancelled: one controller of every
// namespace under leader election, or, with --shards above 1, a controller
// per span of the shards this replica holds (runSharded).
func Run(ctx context.Context, o *Options) error {
	// Informers stop with this context. It is cancelled on return, also when
	// the lease was lost while the process context lives on, so that the
	// factories' Shutdown does not wait forever.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b, err := newBase(ctx, o)
	if err != nil {
		return err
	}
	defer b.stopEvents()
	if o.Shards > 1 {
		return runSharded(ctx, b)
	}
	return runWhole(ctx, b)
}

// runWhole runs one controller of every namespace (or of
// --vpa-object-namespace), while this replica leads.
func runWhole(ctx context.Context, b *base) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o, kube := b.o, b.kube
	namespace := metav1.NamespaceAll
	if o.VPAObjectNamespace != "" {
		namespace = o.VPAObjectNamespace
	}
	// Pods are cached trimmed to what the updater reads (cachetrim), and
	// only while not terminal.
	podFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(namespace),
		informers.WithTransform(cachetrim.Transform),
		informers.WithTweakListOptions(notTerminal))
	// Resizes sent only when they fit their node (resize-when: fits-node)
	// count every pod bound to it, whatever its namespace (a DaemonSet's,
	// kube-system's). Serving one namespace, the pods cached above are that
	// namespace's only: a second, cluster-wide view holds what the check
	// reads of the others (cachetrim.NodeView). It needs list and watch on
	// pods cluster-wide, which the shipped ClusterRole grants.
	nodePods, nodePodFactory := newNodePods(kube, namespace, podFactory)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(namespace), informers.WithTransform(cachetrim.Transform))
	vpaFactory := vpainformers.NewSharedInformerFactoryWithOptions(b.vpaClient, 0,
		vpainformers.WithNamespace(namespace), vpainformers.WithTransform(cachetrim.Transform))
	vpaInformer := vpaFactory.Autoscaling().V1().VerticalPodAutoscalers()

	recommendations, err := recommendation.NewClusterMemo(factory, b.minor)
	if err != nil {
		return err
	}
	resolver, err := target.NewClusterResolver(ctx, b.config, factory, vpaInformer.Informer())
	if err != nil {
		return err
	}

	// Infeasible records and memory records live in ConfigMaps of the
	// updater's namespace (one per VPA and store), so that neither a restart
	// nor a new leader tries them again; records a previous version left on
	// the VPAs' annotations are moved there. A dry run writes nothing.
	// Load keeps a record only for a live pod or Job of its VPA's namespace
	// (index lookups, no owner walk); whether the pod's VPA is the record's
	// is told at the pod's first sync. Load runs after the controller's
	// caches have synced.
	var ctrl *updater.Controller
	stores, err := b.newStores(vpaInformer.Lister(), storeScope{namespace: namespace},
		func(owner records.Owner, uid types.UID) bool { return ctrl.RecordLive(owner, uid) },
		func(owner records.Owner, uid types.UID) bool { return ctrl.SafetyRecordLive(owner, uid) })
	if err != nil {
		return err
	}
	ctrl, err = updater.New(ctx, b.controllerConfig(), updater.Deps{
		Client:     kube,
		VPAClient:  b.vpaClient,
		Pods:       podFactory.Core().V1().Pods(),
		VPAs:       vpaInformer,
		ConfigMaps: b.killSwitch.informer,
		Namespaces: factory.Core().V1().Namespaces(),
		Jobs:       factory.Batch().V1().Jobs(),
		PDBs:       factory.Policy().V1().PodDisruptionBudgets(),
		Nodes:      factory.Core().V1().Nodes(),
		NodePods:   nodePods,
		MinReady: disruption.MinReady{
			ReplicaSets:  factory.Apps().V1().ReplicaSets().Lister(),
			StatefulSets: factory.Apps().V1().StatefulSets().Lister(),
			DaemonSets:   factory.Apps().V1().DaemonSets().Lister(),
		},
		Resolver:      resolver,
		Calculator:    recommendations,
		Store:         stores.infeasible,
		MemoryRecords: stores.memory,
		SafetyRecords: stores.safety,
		JVMRecords:    stores.jvm,
		Checkpoints:   vpaFactory.Autoscaling().V1().VerticalPodAutoscalerCheckpoints(),
		Usage:         b.memoryUsage,
		Metrics:       b.metrics,
		Recorder:      b.recorder,
		FeatureGate:   o.FeatureGate,
	})
	if err != nil {
		return err
	}

	podFactory.Start(ctx.Done())
	nodePodFactory.Start(ctx.Done())
	factory.Start(ctx.Done())
	vpaFactory.Start(ctx.Done())
	b.killSwitch.start(ctx)
	defer func() {
		cancel()
		podFactory.Shutdown()
		nodePodFactory.Shutdown()
		factory.Shutdown()
		vpaFactory.Shutdown()
		b.killSwitch.shutdown()
	}()

	// Probes and metrics are served from the start; /readyz turns ready
	// once the caches have synced (on standby replicas too).
	// The controllers' and LimitRanges' caches are read to resolve targets
	// and cap recommendations: a pod handled before they sync would find no
	// VPA and wait for the next resync. Wait for them (probes answer "not
	// ready" meanwhile).
	factoriesSynced := make(chan struct{})
	go func() {
		defer close(factoriesSynced)
		factory.WaitForCacheSync(ctx.Done())
	}()
	synced := server.CheckFunc("informers", func() error {
		select {
		case <-factoriesSynced:
		default:
			return errors.New("controller and LimitRange caches not synced")
		}
		if !ctrl.HasSynced() {
			return errors.New("caches not synced")
		}
		return ctrl.RecordsLoaded()
	})
	stopProbes, err := b.serveProbes(ctx, synced)
	if err != nil {
		return err
	}
	defer stopProbes()

	select {
	case <-factoriesSynced:
	case <-ctx.Done():
		return nil
	}
	if !o.LeaderElection.LeaderElect {
		b.leader.set(true)
		defer b.leader.set(false)
		return ctrl.Run(ctx)
	}
	return runAsLeader(ctx, kube, o.LeaderElection, b.leader, ctrl.Run)
}

// notTerminal lists and watches the pods that have not terminated.
func notTerminal(lo *metav1.ListOptions) {
	lo.FieldSelector = fields.AndSelectors(
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
	).String()
}

// serveProbes serves /healthz, /readyz (ready once synced passes) and
// /metrics on --address from now until the function returned is called.
func (b *base) serveProbes(ctx context.Context, synced server.Check) (stop func(), err error) {
	logger := klog.FromContext(ctx)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", b.o.Address)
	if err != nil {
		return nil, fmt.Errorf("listening on --address %s: %w", b.o.Address, err)
	}
	mux := server.NewMux(b.registry, synced)
	if b.o.Profiling {
		server.EnableProfiling(mux)
	}
	probes := server.NewProbeServer(ctx, mux)
	probeCtx, stopProbes := context.WithCancel(context.WithoutCancel(ctx))
	probeDone := make(chan error, 1)
	go func() { probeDone <- server.Serve(probeCtx, probes, ln, 5*time.Second) }()
	return func() {
		stopProbes()
		if err := <-probeDone; err != nil {
			logger.Error(err, "Probe server")
		}
	}, nil
}

// checkRecordsNamespace refuses a records namespace that is missing or not
// writable (records.ErrNotWritable). An API server that gives no verdict
// yet is left to the first Load, which checks again before anything is
// decided.
func checkRecordsNamespace(ctx context.Context, configMaps corev1client.ConfigMapsGetter, namespace, prefix string) error {
	err := records.CheckWritable(ctx, configMaps, namespace, prefix, records.StoreInfeasible)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, records.ErrNotWritable):
		return fmt.Errorf("--records-namespace %s: %w", namespace, err)
	default:
		klog.FromContext(ctx).Error(err, "Cannot check the records namespace yet; the first load of the records checks it again", "recordsNamespace", namespace)
		return nil
	}
}

// newNodePods returns the pods bound to nodes that fits-node reads, and the
// factory to start: the pods' own informer when the updater serves every
// namespace, otherwise a cluster-wide view (newNodeView).
func newNodePods(kube kubernetes.Interface, namespace string, podFactory informers.SharedInformerFactory) (coreinformers.PodInformer, informers.SharedInformerFactory) {
	if namespace == metav1.NamespaceAll {
		return podFactory.Core().V1().Pods(), podFactory
	}
	return newNodeView(kube)
}

// newNodeView returns a cluster-wide view of the bound pods that have not
// terminated, trimmed to what fits-node reads (cachetrim.NodeView), and
// the factory to start.
func newNodeView(kube kubernetes.Interface) (coreinformers.PodInformer, informers.SharedInformerFactory) {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTransform(cachetrim.NodeView),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.AndSelectors(
				fields.OneTermNotEqualSelector("spec.nodeName", ""),
				fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
				fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
			).String()
		}))
	return factory.Core().V1().Pods(), factory
}

// newRecorder returns the event recorder of the binary (pkg/eventsink),
// and the function that stops it.
func newRecorder(ctx context.Context, kube kubernetes.Interface) (record.EventRecorder, func(), error) {
	return eventsink.New(ctx, kube, UserAgent)
}

// killSwitch watches the one ConfigMap of --config-map, by name, in its
// namespace only (a namespaced Role grants that).
type killSwitch struct {
	name     types.NamespacedName
	factory  informers.SharedInformerFactory
	informer coreinformers.ConfigMapInformer
}

func newKillSwitch(kube kubernetes.Interface, o *Options) (*killSwitch, error) {
	if o.ConfigMap == "" {
		return &killSwitch{}, nil
	}
	namespace, name, err := o.configMapName()
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	return &killSwitch{
		name:     types.NamespacedName{Namespace: namespace, Name: name},
		factory:  factory,
		informer: factory.Core().V1().ConfigMaps(),
	}, nil
}

func (k *killSwitch) start(ctx context.Context) {
	if k.factory != nil {
		k.factory.Start(ctx.Done())
	}
}

func (k *killSwitch) shutdown() {
	if k.factory != nil {
		k.factory.Shutdown()
	}
}

// serverMinor returns the API server's minor version, 0 when it cannot be
// read (version-specific checks are then left to the API server).
func serverMinor(ctx context.Context, kube kubernetes.Interface) int {
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot read the API server version; version-specific checks are left to the API server")
		return 0
	}
	minor, err := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	if err != nil {
		return 0
	}
	return minor
}
