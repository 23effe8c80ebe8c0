package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"

	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"

	"github.com/vpa-inplace/vpa-inplace/pkg/cachetrim"
	"github.com/vpa-inplace/vpa-inplace/pkg/eventsink"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/server"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/usage"
)

// UserAgent identifies the updater to the API server.
const UserAgent = "vpa-inplace-updater"

// Run runs the updater until ctx is cancelled.
func Run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	// Informers stop with this context. It is cancelled on return, also when
	// the lease was lost while the process context lives on, so that the
	// factories' Shutdown does not wait forever.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	config, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading client configuration: %w", err)
	}
	config.QPS, config.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	config = rest.AddUserAgent(config, UserAgent)

	// Metrics first: every client's failed requests are counted.
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := report.NewMetrics(registry)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	config.Wrap(metrics.InstrumentTransport)
	leader, err := newLeaderGauge(registry)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	vpaClient, err := vpaclientset.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating VPA client: %w", err)
	}
	minor := serverMinor(ctx, kube)
	canarySetting, err := resize.ParseCanary(o.Canary)
	if err != nil {
		return fmt.Errorf("--canary: %w", err)
	}
	gcPercent, gcFromEnv := ApplyGCPercent(os.LookupEnv)
	logger.Info("Starting vpa-inplace updater", "inPlaceGate", o.FeatureGate.Enabled("InPlace"), "serverMinor", minor,
		"dryRun", o.DryRun, "killSwitch", o.ConfigMap, "gcPercent", gcPercent, "gcPercentFromEnv", gcFromEnv)

	// The leader election Lease ships with the manifests, and the updater
	// may only read and update it: one that is missing is created if RBAC
	// allows (older manifests), or the updater does not start.
	if o.LeaderElection.LeaderElect {
		if err := ensureLease(ctx, kube.CoordinationV1(), o.LeaderElection.ResourceNamespace, o.LeaderElection.ResourceName); err != nil {
			return err
		}
	}

	// A records namespace that is missing or not writable is a startup
	// error: every resize sent would have its failure recorded nowhere, and
	// be sent again after a restart. A dry run records nothing.
	var recordsOwner *metav1.OwnerReference
	if !o.DryRun {
		if err := checkRecordsNamespace(ctx, kube.CoreV1(), o.RecordsNamespace, o.RecordsPrefix); err != nil {
			return err
		}
		if o.RecordsOwner != "" {
			if recordsOwner, err = leaseOwnerReference(ctx, kube.CoordinationV1(), o.RecordsNamespace, o.RecordsOwner); err != nil {
				return err
			}
		}
	}

	namespace := metav1.NamespaceAll
	if o.VPAObjectNamespace != "" {
		namespace = o.VPAObjectNamespace
	}
	// Pods are cached trimmed to what the updater reads (cachetrim), and
	// only while not terminal.
	podFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(namespace),
		informers.WithTransform(cachetrim.Transform),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.AndSelectors(
				fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
				fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
			).String()
		}))
	// Resizes sent only when they fit their node (resize-when: fits-node)
	// count every pod bound to it, whatever its namespace (a DaemonSet's,
	// kube-system's). Serving one namespace, the pods cached above are that
	// namespace's only: a second, cluster-wide view holds what the check
	// reads of the others (cachetrim.NodeView). It needs list and watch on
	// pods cluster-wide, which the shipped ClusterRole grants.
	nodePods, nodePodFactory := newNodePods(kube, namespace, podFactory)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(namespace), informers.WithTransform(cachetrim.Transform))
	vpaFactory := vpainformers.NewSharedInformerFactoryWithOptions(vpaClient, 0,
		vpainformers.WithNamespace(namespace), vpainformers.WithTransform(cachetrim.Transform))
	vpaInformer := vpaFactory.Autoscaling().V1().VerticalPodAutoscalers()

	recommendations, err := recommendation.NewClusterMemo(factory, minor)
	if err != nil {
		return err
	}
	resolver, err := target.NewClusterResolver(ctx, config, factory, vpaInformer.Informer())
	if err != nil {
		return err
	}

	// Events go through a client of their own, with its own rate limiter, so
	// that a burst of events never delays resize patches.
	eventClient, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the event client: %w", err)
	}
	recorder, stopEvents, err := newRecorder(ctx, eventClient)
	if err != nil {
		return err
	}
	defer stopEvents()

	// Infeasible records and memory records live in ConfigMaps of the
	// updater's namespace (one per VPA and store), so that neither a restart
	// nor a new leader tries them again; records a previous version left on
	// the VPAs' annotations are moved there. A dry run writes nothing.
	var store, memStore, safetyStore records.Store = records.NewInMemoryStore(), records.NewInMemoryStore(), records.NewInMemoryStore()
	var jvmStore records.Store = records.NewInMemoryStore()
	// Load keeps a record only for a live pod or Job of its VPA's namespace
	// (index lookups, no owner walk); whether the pod's VPA is the record's
	// is told at the pod's first sync. Load runs after the controller's
	// caches have synced.
	var ctrl *updater.Controller
	live := func(owner records.Owner, uid types.UID) bool { return ctrl.RecordLive(owner, uid) }
	if !o.DryRun {
		recordsMetrics, err := records.NewMetrics(registry)
		if err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
		newStore := func(name, annotation string) (records.Store, error) {
			return records.NewConfigMapStore(kube.CoreV1(), vpaClient.AutoscalingV1(), vpaInformer.Lister(), records.ConfigMapStoreConfig{
				Namespace: o.RecordsNamespace, Prefix: o.RecordsPrefix, Store: name, AnnotationKey: annotation, NoAnnotation: annotation == "",
				VPANamespace: namespace, IgnoredNamespaces: o.IgnoredVPANamespaces, Owner: recordsOwner,
				Metrics: recordsMetrics, Now: time.Now, Live: live,
			})
		}
		if store, err = newStore(records.StoreInfeasible, records.AnnotationKey); err != nil {
			return err
		}
		if memStore, err = newStore(records.StoreMemory, records.MemoryAnnotationKey); err != nil {
			return err
		}
		// The memory limits JVMs started with were never on the VPAs'
		// annotations either.
		if jvmStore, err = newStore(records.StoreJVM, ""); err != nil {
			return err
		}
		// The safety records (canaries, reverts due, holds) were never on
		// the VPAs' annotations; a hold is keyed by its VPA's own UID.
		if safetyStore, err = records.NewConfigMapStore(kube.CoreV1(), vpaClient.AutoscalingV1(), vpaInformer.Lister(), records.ConfigMapStoreConfig{
			Namespace: o.RecordsNamespace, Prefix: o.RecordsPrefix, Store: records.StoreSafety, NoAnnotation: true,
			VPANamespace: namespace, IgnoredNamespaces: o.IgnoredVPANamespaces, Owner: recordsOwner,
			Metrics: recordsMetrics, Now: time.Now,
			Live: func(owner records.Owner, uid types.UID) bool { return ctrl.SafetyRecordLive(owner, uid) },
		}); err != nil {
			return err
		}
	}
	// Memory usage for safe memory-limit decreases, when the metrics API is
	// served; looked for now and again later, never waited for.
	metricsClient, err := metricsclientset.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the metrics API client: %w", err)
	}
	memoryUsage := usage.NewMetricsSource(kube.Discovery(), metricsClient.MetricsV1beta1(), usage.Config{Observe: metrics.MetricsAPIRequest})
	memoryUsage.Check(ctx)
	killSwitch, err := newKillSwitch(kube, o)
	if err != nil {
		return err
	}

	ctrl, err = updater.New(ctx, updater.Config{
		Threshold:            o.PodUpdateThreshold,
		EvictionTolerance:    o.EvictionTolerance,
		RestartMinReady:      o.RestartMinReady,
		ReversalHold:         o.ReversalHold,
		DecreaseMinHistory:   o.DecreaseMinHistory,
		RecommenderInterval:  o.RecommenderInterval,
		MaxFreeze:            o.MaxFreeze,
		ResyncInterval:       o.UpdaterInterval,
		Workers:              o.EffectiveWorkers(),
		IgnoredNamespaces:    o.IgnoredVPANamespaces,
		ServerMinor:          minor,
		DryRun:               o.DryRun,
		DeferredWarningAfter: o.DeferredWarningAfter,
		ConfigMap:            killSwitch.name,
		MemoryLimitMargin:    o.MemoryLimitDecreaseMargin,
		ObservationWindow:    o.ResizeObservationWindow,
		HarmHold:             o.HarmHold,
		NotReadyGrace:        o.HarmNotReadyGrace,
		Canary:               canarySetting,
		BoostMaxRestarts:     int32(o.StartupBoostMaxRestarts),
		// Places of restarting resizes the kubelet has not applied.
		RestartReservationTimeout: o.RestartReservationTimeout,
	}, updater.Deps{
		Client:     kube,
		VPAClient:  vpaClient,
		Pods:       podFactory.Core().V1().Pods(),
		VPAs:       vpaInformer,
		ConfigMaps: killSwitch.informer,
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
		Store:         store,
		MemoryRecords: memStore,
		SafetyRecords: safetyStore,
		JVMRecords:    jvmStore,
		Checkpoints:   vpaFactory.Autoscaling().V1().VerticalPodAutoscalerCheckpoints(),
		Usage:         memoryUsage,
		Metrics:       metrics,
		Recorder:      recorder,
		FeatureGate:   o.FeatureGate,
	})
	if err != nil {
		return err
	}

	podFactory.Start(ctx.Done())
	nodePodFactory.Start(ctx.Done())
	factory.Start(ctx.Done())
	vpaFactory.Start(ctx.Done())
	killSwitch.start(ctx)
	defer func() {
		cancel()
		podFactory.Shutdown()
		nodePodFactory.Shutdown()
		factory.Shutdown()
		vpaFactory.Shutdown()
		killSwitch.shutdown()
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

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.Address)
	if err != nil {
		return fmt.Errorf("listening on --address %s: %w", o.Address, err)
	}
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
	mux := server.NewMux(registry, synced)
	if o.Profiling {
		server.EnableProfiling(mux)
	}
	probes := server.NewProbeServer(ctx, mux)
	probeCtx, stopProbes := context.WithCancel(context.WithoutCancel(ctx))
	probeDone := make(chan error, 1)
	go func() { probeDone <- server.Serve(probeCtx, probes, ln, 5*time.Second) }()
	defer func() {
		stopProbes()
		if err := <-probeDone; err != nil {
			logger.Error(err, "Probe server")
		}
	}()

	select {
	case <-factoriesSynced:
	case <-ctx.Done():
		return nil
	}
	if !o.LeaderElection.LeaderElect {
		leader.set(true)
		defer leader.set(false)
		return ctrl.Run(ctx)
	}
	return runAsLeader(ctx, kube, o.LeaderElection, leader, ctrl.Run)
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
// namespace, otherwise a cluster-wide view of the bound pods that have not
// terminated, trimmed to what the check reads (cachetrim.NodeView).
func newNodePods(kube kubernetes.Interface, namespace string, podFactory informers.SharedInformerFactory) (coreinformers.PodInformer, informers.SharedInformerFactory) {
	if namespace == metav1.NamespaceAll {
		return podFactory.Core().V1().Pods(), podFactory
	}
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
