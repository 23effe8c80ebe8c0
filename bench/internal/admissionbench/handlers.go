package admissionbench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/logic"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/pod"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/pod/patch"
	uprecommendation "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/pod/recommendation"
	upvpa "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/vpa"
	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"
	uptarget "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/client"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"
	upmetrics "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/metrics"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"

	"github.com/vpa-inplace/vpa-inplace/pkg/admission"
	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
)

// restConfig is what the /scale clients of both are built from. Nothing
// here reaches it: every target is a Deployment, read from informers.
var restConfig = &rest.Config{Host: "https://127.0.0.1:1"}

// Ours returns our pod admission handler wired as
// cmd/admission-controller/app wires it, with its informers synced. They
// stop with ctx.
func Ours(ctx context.Context, c *Cluster) (http.Handler, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithTransform(admission.CacheTransform))
	vpaFactory := vpainformers.NewSharedInformerFactoryWithOptions(c.VPAs, 0, vpainformers.WithTransform(admission.CacheTransform))
	vpaInformer := vpaFactory.Autoscaling().V1().VerticalPodAutoscalers()
	recommendations, err := recommendation.NewClusterMemo(factory, 0)
	if err != nil {
		return nil, err
	}
	resolver, err := target.NewClusterResolver(ctx, restConfig, factory, vpaInformer.Informer())
	if err != nil {
		return nil, err
	}
	metrics, err := admission.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	gate := features.NewFeatureGate()
	if err := gate.Set(string(features.InPlace) + "=true"); err != nil {
		return nil, err
	}
	handler, err := admission.NewHandler(admission.Config{
		FeatureGate:     gate,
		VPAs:            resolver,
		Recommendations: recommendations,
		Metrics:         metrics,
		Timeout:         4 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	factory.StartWithContext(ctx)
	vpaFactory.StartWithContext(ctx)
	for _, result := range []cache.SyncResult{factory.WaitForCacheSyncWithContext(ctx), vpaFactory.WaitForCacheSyncWithContext(ctx)} {
		if err := result.AsError(); err != nil {
			return nil, fmt.Errorf("waiting for caches: %w", err)
		}
	}
	return handler, nil
}

// Upstream's constants in pkg/admission-controller/main.go.
const (
	upstreamResyncPeriod         = 10 * time.Minute
	scaleCacheEntryLifetime      = time.Hour
	scaleCacheEntryFreshnessTime = 10 * time.Minute
	scaleCacheEntryJitterFactor  = 1.
)

// Upstream returns upstream's admission server (v1.8.1) wired as its
// pkg/admission-controller/main.go wires it, serving every path as there,
// with its informers synced. The VPA informer is that of
// vpa_api_util.NewVpasListerWithIndexer, which needs a real clientset: the
// same informer, indexers and transform over the fake's list and watch.
func Upstream(ctx context.Context, c *Cluster) (http.Handler, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(c.Kube, upstreamResyncPeriod, informers.WithTransform(client.StripManagedFields))
	vpaStore, vpaController := cache.NewInformerWithOptions(cache.InformerOptions{
		ObjectType: &vpatypes.VerticalPodAutoscaler{},
		// As the informers of a fake clientset: the fake does not serve
		// watch-list requests.
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
				return c.VPAs.AutoscalingV1().VerticalPodAutoscalers("").List(ctx, options)
			},
			WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
				return c.VPAs.AutoscalingV1().VerticalPodAutoscalers("").Watch(ctx, options)
			},
		}, c.VPAs),
		Handler:      &cache.ResourceEventHandlerFuncs{},
		ResyncPeriod: time.Hour,
		Indexers: cache.Indexers{
			cache.NamespaceIndex:      cache.MetaNamespaceIndexFunc,
			vpaapiutil.TargetRefIndex: vpaapiutil.TargetRefIndexFunc,
		},
		Transform: client.StripManagedFields,
	})
	vpaIndexer, ok := vpaStore.(cache.Indexer)
	if !ok {
		return nil, fmt.Errorf("the VPA store is not an indexer")
	}
	go vpaController.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), vpaController.HasSynced) {
		return nil, fmt.Errorf("the VPA cache did not sync")
	}

	targetSelectorFetcher := uptarget.NewVpaTargetSelectorFetcher(restConfig, c.Kube, factory, ctx.Done())
	controllerFetcher := controllerfetcher.NewControllerFetcher(restConfig, c.Kube, factory, scaleCacheEntryFreshnessTime,
		scaleCacheEntryLifetime, scaleCacheEntryJitterFactor, ctx.Done())
	limitRangeCalculator, err := limitrange.NewLimitsRangeCalculator(factory)
	if err != nil {
		return nil, fmt.Errorf("creating the LimitRange calculator: %w", err)
	}
	recommendationProvider := uprecommendation.NewProvider(limitRangeCalculator, vpaapiutil.NewCappingRecommendationProcessor(limitRangeCalculator))
	vpaMatcher := upvpa.NewMatcher(vpaIndexer, targetSelectorFetcher, controllerFetcher)
	factory.Start(ctx.Done())
	for kind, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return nil, fmt.Errorf("the %s cache did not sync", kind)
		}
	}
	calculators := []patch.Calculator{
		patch.NewResourceUpdatesCalculator(recommendationProvider, resource.QuantityValue{}),
		patch.NewObservedContainersCalculator(),
	}
	as := logic.NewAdmissionServer(pod.NewDefaultPreProcessor(), upvpa.NewDefaultPreProcessor(), limitRangeCalculator, vpaMatcher, calculators)
	healthCheck := upmetrics.NewHealthCheck(time.Minute)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		as.Serve(w, r)
		healthCheck.UpdateLastActivity()
	}), nil
}
