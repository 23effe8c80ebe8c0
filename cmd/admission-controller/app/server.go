package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"

	"github.com/vpa-inplace/vpa-inplace/pkg/admission"
	"github.com/vpa-inplace/vpa-inplace/pkg/certwatch"
	"github.com/vpa-inplace/vpa-inplace/pkg/eventsink"
	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/selfcert"
	"github.com/vpa-inplace/vpa-inplace/pkg/server"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
)

// certificateSource serves the webhooks' key pair: from files, or kept by
// the admission controller itself.
type certificateSource interface {
	server.Check
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Run(ctx context.Context) error
}

var (
	_ certificateSource = (*certwatch.Watcher)(nil)
	_ certificateSource = (*selfcert.Manager)(nil)
)

// certificateWait is how often the webhook server checks, before
// listening, whether a self-managed certificate is loaded.
const certificateWait = 100 * time.Millisecond

// Timeouts of the webhook server. Handling itself is bounded by
// --request-timeout.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	idleTimeout       = 90 * time.Second
	maxHeaderBytes    = 64 << 10
	// writeSlack is how much longer than --request-timeout a response may
	// take to be written.
	writeSlack      = 5 * time.Second
	shutdownTimeout = 10 * time.Second
)

// Run applies the logging options, connects to the cluster and serves the
// webhooks until ctx is cancelled. It never registers webhook
// configurations: those ship with the deployment manifests. With
// --cert-mode=self-managed it patches their caBundle, and nothing else.
func Run(ctx context.Context, opts *Options) error {
	if err := logsapi.ValidateAndApply(opts.Logs, opts.FeatureGate); err != nil {
		return fmt.Errorf("applying the logging options: %w", err)
	}
	config, err := restConfig(opts)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	vpas, err := vpaclientset.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the VPA client: %w", err)
	}
	// Events go through a client of their own, with its own rate limiter,
	// so that a burst of them never delays the informers.
	events, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the event client: %w", err)
	}
	return run(ctx, opts, clients{config: config, kube: kube, vpas: vpas, events: events}, listenTCP)
}

// clients are the connections to the cluster.
type clients struct {
	config *rest.Config
	kube   kubernetes.Interface
	vpas   vpaclientset.Interface
	// events records events; nil: kube does.
	events kubernetes.Interface
}

// UserAgent identifies the admission controller to the API server, and is
// the source component of its events.
const UserAgent = "vpa-inplace-admission-controller"

// newRecorder returns the event recorder of the binary (pkg/eventsink),
// and the function that stops it.
func newRecorder(ctx context.Context, kube kubernetes.Interface) (record.EventRecorder, func(), error) {
	return eventsink.New(ctx, kube, UserAgent)
}

// listenFunc opens a listener for an address of the options.
type listenFunc func(ctx context.Context, address string) (net.Listener, error)

func listenTCP(ctx context.Context, address string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", address)
}

// MetricCertificateExpiry is when the served certificate expires.
const MetricCertificateExpiry = "vpa_inplace_admission_certificate_expiry_timestamp_seconds"

// certificateExpiry reports the served certificate's notAfter; no sample
// while none is loaded.
func certificateExpiry(certs certificateSource) prometheus.Collector {
	desc := prometheus.NewDesc(MetricCertificateExpiry,
		"When the webhooks' serving certificate expires, in seconds since the epoch (self-managed: rotated before that; files: reloaded when renewed).",
		nil, nil)
	return collectorFunc{desc: desc, collect: func(ch chan<- prometheus.Metric) {
		cert, err := certs.GetCertificate(nil)
		if err != nil || cert.Leaf == nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(cert.Leaf.NotAfter.Unix()))
	}}
}

type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// newCertificateSource returns the source of --cert-mode.
func newCertificateSource(opts *Options, kube kubernetes.Interface) (certificateSource, error) {
	if opts.CertMode == CertModeSelfManaged {
		m, err := selfcert.New(kube, opts.SelfCertConfig())
		if err != nil {
			return nil, fmt.Errorf("self-managed certificate: %w", err)
		}
		return m, nil
	}
	w, err := certwatch.New(opts.TLSCertFile, opts.TLSPrivateKeyFile, certwatch.DefaultPollInterval)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	return w, nil
}

func restConfig(opts *Options) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = opts.Kubeconfig
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	config.QPS = opts.KubeAPIQPS
	config.Burst = opts.KubeAPIBurst
	config.UserAgent = UserAgent
	return config, nil
}

// run serves until ctx is cancelled or a server fails. The probe server
// starts at once; the webhook server once the caches have synced, which is
// also when /readyz turns ready (with a loaded certificate).
func run(ctx context.Context, opts *Options, c clients, listen listenFunc) error {
	logger := klog.FromContext(ctx)
	memoryLimit, memoryLimitFromEnv, err := ApplyMemoryLimit(opts.MemoryLimit, os.LookupEnv)
	if err != nil {
		return err
	}
	logger.Info("Starting the vpa-inplace admission controller",
		"inPlaceGate", opts.FeatureGate.Enabled(features.InPlace), "cpuStartupBoostGate", opts.FeatureGate.Enabled(features.CPUStartupBoost),
		"webhookAddress", opts.WebhookAddress(), "address", opts.Address,
		"maxInflightPodRequests", opts.InflightPodRequests(), "maxInflightVPARequests", opts.MaxInflightVPARequests,
		"maxInflightRequestsPerNamespace", opts.MaxInflightRequestsPerNamespace,
		"recordsNamespace", opts.RecordsNamespace, "goMemoryLimit", memoryLimit, "goMemoryLimitFromEnv", memoryLimitFromEnv)

	minVersion, err := opts.tlsMinVersion()
	if err != nil {
		return err
	}
	ciphers, err := opts.tlsCipherSuites()
	if err != nil {
		return err
	}
	certs, err := newCertificateSource(opts, c.kube)
	if err != nil {
		return err
	}

	registry := prometheus.NewRegistry()
	if err := registry.Register(collectors.NewGoCollector()); err != nil {
		return fmt.Errorf("registering Go metrics: %w", err)
	}
	if err := registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return fmt.Errorf("registering process metrics: %w", err)
	}
	metrics, err := admission.NewMetrics(registry)
	if err != nil {
		return err
	}
	if err := registry.Register(certificateExpiry(certs)); err != nil {
		return fmt.Errorf("registering the certificate metric: %w", err)
	}

	g, ctx := errgroup.WithContext(ctx)

	// Informers: VPAs, LimitRanges, ResourceQuotas and the well-known
	// controllers that target resolution walks from a pod to its VPA's
	// targetRef.
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0,
		informers.WithNamespace(opts.VPAObjectNamespace), informers.WithTransform(admission.CacheTransform))
	vpaFactory := vpainformers.NewSharedInformerFactoryWithOptions(c.vpas, 0,
		vpainformers.WithNamespace(opts.VPAObjectNamespace), vpainformers.WithTransform(admission.CacheTransform))
	vpaInformer := vpaFactory.Autoscaling().V1().VerticalPodAutoscalers()
	// Pods are reviewed as they are created, when LimitRanger checks every
	// value on every version: no server version needed.
	recommendations, err := recommendation.NewClusterMemo(factory, 0)
	if err != nil {
		return err
	}
	limits, err := admission.NewLimits(factory)
	if err != nil {
		return err
	}
	resolver, err := target.NewClusterResolver(ctx, c.config, factory, vpaInformer.Informer())
	if err != nil {
		return err
	}
	if _, err := vpaInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if vpa, ok := obj.(*vpatypes.VerticalPodAutoscaler); ok {
				resolver.Forget(vpa.UID)
				recommendations.Forget(vpa.UID)
			}
		},
	}); err != nil {
		return fmt.Errorf("watching VPA deletions: %w", err)
	}

	// The holds after harm: the updater's safety records, in its records
	// namespace, that label only.
	var holds *admission.Holds
	var holdsFactory informers.SharedInformerFactory
	if opts.RecordsNamespace != "" {
		holdsFactory = informers.NewSharedInformerFactoryWithOptions(c.kube, 0,
			informers.WithNamespace(opts.RecordsNamespace), informers.WithTransform(admission.HoldsTransform(opts.RecordsPrefix)),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = admission.HoldsSelector() }))
		if holds, err = admission.NewHolds(logger, holdsFactory.Core().V1().ConfigMaps().Informer()); err != nil {
			return err
		}
	}

	eventClient := c.events
	if eventClient == nil {
		eventClient = c.kube
	}
	recorder, stopEvents, err := newRecorder(ctx, eventClient)
	if err != nil {
		return err
	}
	defer stopEvents()

	handler, err := admission.NewHandler(admission.Config{
		FeatureGate:             opts.FeatureGate,
		VPAs:                    resolver,
		Recommendations:         recommendations,
		Limits:                  limits,
		Metrics:                 metrics,
		Recorder:                recorder,
		Holds:                   holds,
		Namespace:               opts.VPAObjectNamespace,
		IgnoredNamespaces:       opts.IgnoredVPAObjectNamespaces,
		Timeout:                 opts.RequestTimeout,
		MaxInflightPods:         opts.InflightPodRequests(),
		MaxInflightVPAs:         opts.MaxInflightVPARequests,
		MaxInflightPerNamespace: opts.MaxInflightRequestsPerNamespace,
	})
	if err != nil {
		return err
	}
	webhook := &http.Server{
		// Handling is bounded by --request-timeout through the request's
		// context, and the response by WriteTimeout: no wrapper that runs
		// each request in a goroutine of its own.
		Handler: handler,
		TLSConfig: &tls.Config{
			MinVersion:     minVersion,
			CipherSuites:   ciphers,
			GetCertificate: certs.GetCertificate,
		},
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      opts.RequestTimeout + writeSlack,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          klog.NewStandardLogger("INFO"),
		BaseContext:       server.BaseContext(ctx),
	}

	synced := server.NewSignal("informers")
	probeListener, err := listen(ctx, opts.Address)
	if err != nil {
		return fmt.Errorf("listening on --address %s: %w", opts.Address, err)
	}
	mux := server.NewMux(registry, synced, certs)
	if opts.Profiling {
		server.EnableProfiling(mux)
	}
	probes := server.NewProbeServer(ctx, mux)
	g.Go(func() error { return server.Serve(ctx, probes, probeListener, shutdownTimeout) })
	g.Go(func() error { return certs.Run(ctx) })
	g.Go(func() error {
		factory.StartWithContext(ctx)
		vpaFactory.StartWithContext(ctx)
		results := []cache.SyncResult{factory.WaitForCacheSyncWithContext(ctx), vpaFactory.WaitForCacheSyncWithContext(ctx)}
		if holdsFactory != nil {
			holdsFactory.StartWithContext(ctx)
			results = append(results, holdsFactory.WaitForCacheSyncWithContext(ctx))
			// The informer synced is not yet every hold delivered to Holds.
			if !cache.WaitForCacheSync(ctx.Done(), holds.HasSynced) && ctx.Err() == nil {
				return errors.New("waiting for caches: the holds after harm did not sync")
			}
		}
		for _, result := range results {
			if err := result.AsError(); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("waiting for caches: %w", err)
			}
		}
		synced.Set()
		logger.Info("Caches synced")
		// A self-managed certificate may not be there yet: a TLS server
		// without one would fail every handshake.
		if err := wait.PollUntilContextCancel(ctx, certificateWait, true, func(context.Context) (bool, error) {
			return certs.Ready() == nil, nil
		}); err != nil {
			return nil
		}
		// Listen only now: before, a webhook call would wait on a server
		// that cannot answer it yet.
		webhookListener, err := listen(ctx, opts.WebhookAddress())
		if err != nil {
			return fmt.Errorf("listening on %s: %w", opts.WebhookAddress(), err)
		}
		return server.Serve(ctx, webhook, webhookListener, shutdownTimeout)
	})
	err = g.Wait()
	factory.Shutdown()
	vpaFactory.Shutdown()
	if holdsFactory != nil {
		holdsFactory.Shutdown()
	}
	return err
}
