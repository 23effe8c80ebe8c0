package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"

	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/usage"
)

// base is what every updater holds once, whether one controller works
// every namespace or a controller per span of shards works some: the
// clients, the metrics, the event recorder, the kill switch, the metrics
// API.
type base struct {
	o              *Options
	config         *rest.Config
	registry       *prometheus.Registry
	metrics        *report.Metrics
	leader         *leaderGauge
	kube           kubernetes.Interface
	vpaClient      vpaclientset.Interface
	minor          int
	canary         resize.Canary
	recorder       record.EventRecorder
	stopEvents     func()
	recordsOwner   *metav1.OwnerReference
	recordsMetrics *records.Metrics
	memoryUsage    *usage.MetricsSource
	killSwitch     *killSwitch
}

// newBase builds what every updater holds once; its stopEvents is to be
// called on return.
func newBase(ctx context.Context, o *Options) (*base, error) {
	logger := klog.FromContext(ctx)
	config, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading client configuration: %w", err)
	}
	config.QPS, config.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	config = rest.AddUserAgent(config, UserAgent)
	b := &base{o: o, config: config, stopEvents: func() {}}

	// Metrics first: every client's failed requests are counted.
	b.registry = prometheus.NewRegistry()
	b.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if b.metrics, err = report.NewMetrics(b.registry); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	config.Wrap(b.metrics.InstrumentTransport)
	if b.leader, err = newLeaderGauge(b.registry); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}

	if b.kube, err = kubernetes.NewForConfig(config); err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	if b.vpaClient, err = vpaclientset.NewForConfig(config); err != nil {
		return nil, fmt.Errorf("creating VPA client: %w", err)
	}
	b.minor = serverMinor(ctx, b.kube)
	if b.canary, err = resize.ParseCanary(o.Canary); err != nil {
		return nil, fmt.Errorf("--canary: %w", err)
	}
	gcPercent, gcFromEnv := ApplyGCPercent(os.LookupEnv)
	logger.Info("Starting vpa-inplace updater", "inPlaceGate", o.FeatureGate.Enabled("InPlace"), "serverMinor", b.minor,
		"dryRun", o.DryRun, "killSwitch", o.ConfigMap, "gcPercent", gcPercent, "gcPercentFromEnv", gcFromEnv, "shards", o.Shards)

	// The leader election Lease ships with the manifests, and the updater
	// may only read and update it: one that is missing is created if RBAC
	// allows (older manifests), or the updater does not start. So do the
	// shards' Leases.
	if o.LeaderElection.LeaderElect {
		for _, name := range o.leaseNames() {
			if err := ensureLease(ctx, b.kube.CoordinationV1(), o.LeaderElection.ResourceNamespace, name); err != nil {
				return nil, err
			}
		}
	}

	// A records namespace that is missing or not writable is a startup
	// error: every resize sent would have its failure recorded nowhere, and
	// be sent again after a restart. A dry run records nothing.
	if !o.DryRun {
		if err := checkRecordsNamespace(ctx, b.kube.CoreV1(), o.RecordsNamespace, o.RecordsPrefix); err != nil {
			return nil, err
		}
		if o.RecordsOwner != "" {
			if b.recordsOwner, err = leaseOwnerReference(ctx, b.kube.CoordinationV1(), o.RecordsNamespace, o.RecordsOwner); err != nil {
				return nil, err
			}
		}
		if b.recordsMetrics, err = records.NewMetrics(b.registry); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}

	// Events go through a client of their own, with its own rate limiter, so
	// that a burst of events never delays resize patches.
	eventClient, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("creating the event client: %w", err)
	}
	if b.recorder, b.stopEvents, err = newRecorder(ctx, eventClient); err != nil {
		return nil, err
	}
	// Memory usage for safe memory-limit decreases, when the metrics API is
	// served; looked for now and again later, never waited for.
	metricsClient, err := metricsclientset.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("creating the metrics API client: %w", err)
	}
	b.memoryUsage = usage.NewMetricsSource(b.kube.Discovery(), metricsClient.MetricsV1beta1(), usage.Config{Observe: b.metrics.MetricsAPIRequest})
	b.memoryUsage.Check(ctx)
	if b.killSwitch, err = newKillSwitch(b.kube, o); err != nil {
		return nil, err
	}
	return b, nil
}

// recordStores are the three stores of a controller.
type recordStores struct {
	infeasible, memory, safety, jvm records.Store
}

// storeScope is which VPAs a controller's stores serve: those of
// namespace ("" for all), and of the namespaces serves tells when set,
// asked for with shardSelector.
type storeScope struct {
	namespace     string
	serves        func(namespace string) bool
	shardSelector string
}

// newStores returns the records stores of a controller: in memory for a
// dry run, otherwise in ConfigMaps of --records-namespace. live and
// safetyLive tell which records Load keeps (the controller's RecordLive and
// SafetyRecordLive, once it is built).
func (b *base) newStores(vpas vpalisters.VerticalPodAutoscalerLister, scope storeScope,
	live, safetyLive func(records.Owner, types.UID) bool) (recordStores, error) {
	if b.o.DryRun {
		return recordStores{records.NewInMemoryStore(), records.NewInMemoryStore(), records.NewInMemoryStore(), records.NewInMemoryStore()}, nil
	}
	o := b.o
	newStore := func(name, annotation string, live func(records.Owner, types.UID) bool) (records.Store, error) {
		return records.NewConfigMapStore(b.kube.CoreV1(), b.vpaClient.AutoscalingV1(), vpas, records.ConfigMapStoreConfig{
			Namespace: o.RecordsNamespace, Prefix: o.RecordsPrefix, Store: name, AnnotationKey: annotation, NoAnnotation: annotation == "",
			VPANamespace: scope.namespace, IgnoredNamespaces: o.IgnoredVPANamespaces, Serves: scope.serves, ShardSelector: scope.shardSelector,
			Owner: b.recordsOwner, Metrics: b.recordsMetrics, Now: time.Now, Live: live,
		})
	}
	var s recordStores
	var err error
	if s.infeasible, err = newStore(records.StoreInfeasible, records.AnnotationKey, live); err != nil {
		return s, err
	}
	if s.memory, err = newStore(records.StoreMemory, records.MemoryAnnotationKey, live); err != nil {
		return s, err
	}
	// The memory limits JVMs started with were never on the VPAs'
	// annotations either.
	if s.jvm, err = newStore(records.StoreJVM, "", live); err != nil {
		return s, err
	}
	// The safety records (canaries, reverts due, holds) were never on
	// the VPAs' annotations; a hold is keyed by its VPA's own UID.
	if s.safety, err = newStore(records.StoreSafety, "", safetyLive); err != nil {
		return s, err
	}
	return s, nil
}

// controllerConfig is the controller's configuration from the options.
func (b *base) controllerConfig() updater.Config {
	o := b.o
	return updater.Config{
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
		ServerMinor:          b.minor,
		DryRun:               o.DryRun,
		DeferredWarningAfter: o.DeferredWarningAfter,
		ConfigMap:            b.killSwitch.name,
		MemoryLimitMargin:    o.MemoryLimitDecreaseMargin,
		ObservationWindow:    o.ResizeObservationWindow,
		HarmHold:             o.HarmHold,
		NotReadyGrace:        o.HarmNotReadyGrace,
		Canary:               b.canary,
		BoostMaxRestarts:     int32(o.StartupBoostMaxRestarts),
		// Places of restarting resizes the kubelet has not applied.
		RestartReservationTimeout: o.RestartReservationTimeout,
	}
}
