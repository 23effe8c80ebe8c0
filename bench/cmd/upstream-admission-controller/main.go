// Command upstream-admission-controller serves upstream VPA's pod admission
// (the version bench/go.mod pins) for the burst benchmark, wired as its
// pkg/admission-controller/main.go wires it, with two differences: it
// listens on 127.0.0.1 only (upstream's main listens on every interface),
// and the webhook it registers (by URL, as upstream's --register-by-url
// does) holds only the pods rule: the benchmark creates its VPAs
// unvalidated, and measures pod admission.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/logic"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/pod"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/pod/patch"
	uprecommendation "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/pod/recommendation"
	upvpa "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller/resource/vpa"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	uptarget "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/client"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "Kubeconfig.")
	port := flag.Int("port", 0, "Port of the webhook on 127.0.0.1.")
	certFile := flag.String("tls-cert-file", "", "Serving certificate (SAN 127.0.0.1).")
	keyFile := flag.String("tls-private-key", "", "Its key.")
	caFile := flag.String("client-ca-file", "", "CA of the serving certificate, for the webhook's caBundle.")
	timeout := flag.Int("webhook-timeout-seconds", 5, "The webhook's timeout.")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *port, *certFile, *keyFile, *caFile, int32(*timeout)); err != nil {
		klog.ErrorS(err, "upstream admission controller")
		os.Exit(1)
	}
}

// Upstream's constants in pkg/admission-controller/main.go.
const (
	defaultResyncPeriod          = 10 * time.Minute
	scaleCacheEntryLifetime      = time.Hour
	scaleCacheEntryFreshnessTime = 10 * time.Minute
	scaleCacheEntryJitterFactor  = 1.
)

func run(kubeconfig string, port int, certFile, keyFile, caFile string, timeout int32) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// Upstream's defaults (--kube-api-qps, --kube-api-burst).
	config.QPS, config.Burst = 50, 100
	kube := kubernetes.NewForConfigOrDie(config)
	vpaClient := vpaclientset.NewForConfigOrDie(config)
	_, vpaIndexer := vpaapiutil.NewVpasListerWithIndexer(vpaClient, ctx.Done(), "")
	factory := informers.NewSharedInformerFactoryWithOptions(kube, defaultResyncPeriod, informers.WithTransform(client.StripManagedFields))
	targetSelectorFetcher := uptarget.NewVpaTargetSelectorFetcher(config, kube, factory, ctx.Done())
	controllerFetcher := controllerfetcher.NewControllerFetcher(config, kube, factory, scaleCacheEntryFreshnessTime,
		scaleCacheEntryLifetime, scaleCacheEntryJitterFactor, ctx.Done())
	limitRangeCalculator, err := limitrange.NewLimitsRangeCalculator(factory)
	if err != nil {
		return err
	}
	recommendationProvider := uprecommendation.NewProvider(limitRangeCalculator, vpaapiutil.NewCappingRecommendationProcessor(limitRangeCalculator))
	vpaMatcher := upvpa.NewMatcher(vpaIndexer, targetSelectorFetcher, controllerFetcher)
	factory.Start(ctx.Done())
	for kind, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return fmt.Errorf("the %s cache did not sync", kind)
		}
	}
	calculators := []patch.Calculator{patch.NewResourceUpdatesCalculator(recommendationProvider, resource.QuantityValue{}), patch.NewObservedContainersCalculator()}
	as := logic.NewAdmissionServer(pod.NewDefaultPreProcessor(), upvpa.NewDefaultPreProcessor(), limitRangeCalculator, vpaMatcher, calculators)
	mux := http.NewServeMux()
	mux.HandleFunc("/", as.Serve)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	server := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Handler: mux,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	errs := make(chan error, 1)
	go func() { errs <- server.ListenAndServeTLS("", "") }()
	if err := register(ctx, kube, fmt.Sprintf("https://127.0.0.1:%d", port), ca, timeout); err != nil {
		return err
	}
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
		return server.Close()
	}
}

// register creates upstream's MutatingWebhookConfiguration, as its
// selfRegistration does by URL, with the pods rule only.
func register(ctx context.Context, kube kubernetes.Interface, url string, ca []byte, timeout int32) error {
	client := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := client.Delete(ctx, "vpa-webhook-config", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err := client.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "vpa-webhook-config"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "vpa.k8s.io",
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			FailurePolicy:     ptr.To(admissionregistrationv1.Ignore),
			ClientConfig:      admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:    &timeout,
			NamespaceSelector: &metav1.LabelSelector{},
		}},
	}, metav1.CreateOptions{})
	return err
}
