package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"

	"github.com/vpa-inplace/vpa-inplace/pkg/admission"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testcert"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// listeners opens every listener on 127.0.0.1 with a free port and remembers
// which address of the options it stands for.
type listeners struct {
	mu    sync.Mutex
	addrs map[string]string
}

func (l *listeners) listen(ctx context.Context, address string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addrs[address] = ln.Addr().String()
	return ln, nil
}

func (l *listeners) get(address string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs[address]
}

// cluster is a Deployment web whose ReplicaSet web-7d9f8 creates pods
// labelled app=web, and an InPlace VPA of the Deployment.
func cluster() (*kubefake.Clientset, *vpafake.Clientset) {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "deploy-uid"},
		Spec:       appsv1.DeploymentSpec{Selector: selector},
	}
	replicaSet := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f8", Namespace: "default", UID: "rs-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deploy-uid", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: selector},
	}
	vpa := testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj()
	return kubefake.NewClientset(deployment, replicaSet), vpafake.NewSimpleClientset(vpa)
}

const podCreateReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"pod-review",` +
	`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
	`"namespace":"default","operation":"CREATE","object":` + podCreated + `}}`

const podCreated = `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-7d9f8-","labels":{"app":"web"},` +
	`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8","uid":"rs-uid","controller":true}]},` +
	`"spec":{"containers":[{"name":"app","image":"app:1","resources":{"requests":{"cpu":"100m","memory":"100Mi"}}}]}}`

const vpaCreateReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"vpa-review",` +
	`"kind":{"group":"autoscaling.k8s.io","version":"v1","kind":"VerticalPodAutoscaler"},` +
	`"resource":{"group":"autoscaling.k8s.io","version":"v1","resource":"verticalpodautoscalers"},` +
	`"namespace":"default","operation":"CREATE","object":{"apiVersion":"autoscaling.k8s.io/v1","kind":"VerticalPodAutoscaler",` +
	`"metadata":{"name":"db","namespace":"default"},"spec":{"targetRef":{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db"},` +
	`"updatePolicy":{"updateMode":"InPlace"}}}}}`

func postReview(t *testing.T, client *http.Client, url, body string) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(b, &review))
	require.NotNil(t, review.Response)
	return review.Response
}

func httpGet(client *http.Client, url string) (int, string) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The whole binary minus the API server: informers over fake clientsets,
// TLS from files, probes, both webhooks, shutdown.
func TestRunServesTheWebhooks(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	pair := testcert.New(t, "vpa-inplace-webhook")
	opts := NewOptions()
	opts.TLSCertFile, opts.TLSPrivateKeyFile = pair.Write(t, t.TempDir())
	require.Empty(t, opts.Validate())
	kube, vpas := cluster()
	l, done, plain, probes := startServer(t, ctx, opts, kube, vpas)
	code, body := httpGet(plain, probes+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "[+]informers ok")
	assert.Contains(t, body, "[+]certificate ok")
	code, _ = httpGet(plain, probes+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	require.Eventually(t, func() bool { return l.get(opts.WebhookAddress()) != "" }, 30*time.Second, 10*time.Millisecond)
	webhook := "https://" + l.get(opts.WebhookAddress())
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pair.Pool(), MinVersion: tls.VersionTLS12},
	}}

	t.Run("a new pod of an InPlace VPA gets the recommendation", func(t *testing.T) {
		resp := postReview(t, client, webhook+admission.MutatePodsPath, podCreateReview)
		assert.Equal(t, "pod-review", string(resp.UID))
		require.True(t, resp.Allowed)
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		require.NoError(t, err)
		patched, err := patch.Apply([]byte(podCreated))
		require.NoError(t, err)
		var pod corev1.Pod
		require.NoError(t, json.Unmarshal(patched, &pod))
		assert.Zero(t, pod.Spec.Containers[0].Resources.Requests.Cpu().Cmp(resource.MustParse("300m")))
		assert.Zero(t, pod.Spec.Containers[0].Resources.Requests.Memory().Cmp(resource.MustParse("300Mi")))
	})
	t.Run("the gate is off: an InPlace VPA is rejected", func(t *testing.T) {
		resp := postReview(t, client, webhook+admission.ValidateVPAsPath, vpaCreateReview)
		assert.Equal(t, "vpa-review", string(resp.UID))
		assert.False(t, resp.Allowed)
		require.NotNil(t, resp.Result)
		assert.Contains(t, resp.Result.Message, "--feature-gates=InPlace=true")
	})
	t.Run("metrics count both", func(t *testing.T) {
		code, body := httpGet(plain, probes+"/metrics")
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, fmt.Sprintf(`%s{outcome="patched",webhook="mutate-pods"} 1`, admission.MetricRequests))
		assert.Contains(t, body, fmt.Sprintf(`%s{reason="feature_gate"} 1`, admission.MetricVPARejections))
		assert.Contains(t, body, fmt.Sprintf(`%s 1`, admission.MetricPodMutations))
		assert.Contains(t, body, "go_goroutines")
		assert.Contains(t, body, fmt.Sprintf("%s %s", MetricCertificateExpiry, strconv.FormatFloat(float64(pair.Cert.NotAfter.Unix()), 'g', -1, 64)))
	})
	t.Run("plain HTTP is not served on the webhook port", func(t *testing.T) {
		code, _ := httpGet(plain, "http://"+l.get(opts.WebhookAddress())+admission.MutatePodsPath)
		assert.Equal(t, http.StatusBadRequest, code, "Go answers 400 to HTTP on a TLS port")
	})

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}

func TestRunFailsWithoutTheCertificate(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	opts := NewOptions()
	opts.TLSCertFile, opts.TLSPrivateKeyFile = "/nonexistent/tls.crt", "/nonexistent/tls.key"
	kube, vpas := cluster()
	l := &listeners{addrs: map[string]string{}}
	err := run(ctx, opts, clients{config: &rest.Config{Host: "https://127.0.0.1:1"}, kube: kube, vpas: vpas}, l.listen)
	assert.ErrorContains(t, err, "loading the serving certificate")
}

// --cert-mode=self-managed: the certificate comes from the Secret the
// controller creates, and a client holding the caBundle it patched into the
// webhook configuration trusts it.
func TestRunSelfManagedServesWhatItPublishes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	opts := NewOptions()
	opts.CertMode = CertModeSelfManaged
	opts.CertHosts = []string{"127.0.0.1"}
	opts.CertValidatingWebhookConfigurations = nil
	require.Empty(t, opts.Validate())
	kube, vpas := cluster()
	_, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "vpa-inplace-pods"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.vpa-inplace.github.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/mutate-pods")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	l, done, plain, probes := startServer(t, ctx, opts, kube, vpas)
	_, body := httpGet(plain, probes+"/readyz")
	assert.Contains(t, body, "[+]certificate ok")

	var bundle []byte
	require.Eventually(t, func() bool {
		config, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "vpa-inplace-pods", metav1.GetOptions{})
		require.NoError(t, err)
		bundle = config.Webhooks[0].ClientConfig.CABundle
		return len(bundle) > 0
	}, 30*time.Second, 20*time.Millisecond, "the caBundle is patched")
	secret, err := kube.CoreV1().Secrets(opts.CertSecretNamespace).Get(ctx, DefaultCertSecretName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(secret.Data["ca.crt"]), string(bundle))

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(bundle))
	require.Eventually(t, func() bool { return l.get(opts.WebhookAddress()) != "" }, 30*time.Second, 10*time.Millisecond)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	resp := postReview(t, client, "https://"+l.get(opts.WebhookAddress())+admission.MutatePodsPath, podCreateReview)
	assert.True(t, resp.Allowed)
	assert.NotEmpty(t, resp.Patch)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}

// startServer runs the admission controller with opts on the fake clients
// and returns once its /readyz answers OK (caches synced, certificate
// loaded): its listeners, the channel run's error comes on, a plain HTTP
// client and the probes' base URL.
func startServer(t *testing.T, ctx context.Context, opts *Options, kube kubernetes.Interface, vpas vpaclientset.Interface) (*listeners, chan error, *http.Client, string) {
	t.Helper()
	l := &listeners{addrs: map[string]string{}}
	done := make(chan error, 1)
	go func() {
		// The rest config is only used for discovery of /scale targets,
		// which the well-known controllers here never need.
		done <- run(ctx, opts, clients{config: &rest.Config{Host: "https://127.0.0.1:1"}, kube: kube, vpas: vpas}, l.listen)
	}()
	plain := &http.Client{Timeout: 5 * time.Second}
	require.Eventually(t, func() bool { return l.get(opts.Address) != "" }, 30*time.Second, 10*time.Millisecond)
	probes := "http://" + l.get(opts.Address)
	require.Eventually(t, func() bool {
		code, _ := httpGet(plain, probes+"/readyz")
		return code == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "ready once caches synced and the certificate is loaded")
	return l, done, plain, probes
}
