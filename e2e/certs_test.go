//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	// The Secret the shipped RBAC lets the admission controller keep.
	certSecretNamespace = "vpa-inplace-system"
	certSecretName      = "vpa-inplace-admission-certs"
	// A webhook configuration of this test's own, with no caBundle: the
	// suite's admission controller keeps serving vpa-inplace-pods from files.
	selfManagedWebhook = "vpa-inplace-e2e-self-managed"
	// Short lifetimes, so that the certificate rotates every 30 s.
	selfManagedValidity     = 60 * time.Second
	selfManagedRotateBefore = 30 * time.Second
	// repairWithin bounds how long a deleted Secret or a cleared caBundle
	// may stay so.
	repairWithin = 10 * time.Second
)

// An admission controller in --cert-mode=self-managed, started as a
// process with the admission controller's ServiceAccount (the RBAC the
// chart ships, plus a grant for this test's webhook configuration name),
// makes its CA and certificate, has the API server trust it through the
// caBundle it patches (failurePolicy Fail: a pod is created only if the
// call succeeded), repairs a cleared caBundle, fills the Secret the
// manifests ship empty (it may not create one) and, deleted and applied
// again, writes it back with the CA in use, and rotates every 30 s without
// one failed webhook call.
func TestSelfManagedCertificates(t *testing.T) {
	binary, kubeconfig := os.Getenv("E2E_ADMISSION_BINARY"), os.Getenv("E2E_ADMISSION_KUBECONFIG")
	if binary == "" || kubeconfig == "" {
		t.Skip("E2E_ADMISSION_BINARY and E2E_ADMISSION_KUBECONFIG are not set (hack/e2e.sh sets them): the admission controller runs as a process here")
	}
	ctx := ctxFor(t)
	ns := newNamespace(t, nil)
	cleanupSelfManaged(t)
	t.Cleanup(func() { cleanupSelfManaged(t) })
	// The Secret as the manifests ship it (overlays/local applied it; the
	// cleanup above deleted what an earlier run left in it).
	shipEmptySecret(t)

	// The test's configuration name is not in the shipped RBAC: grant the
	// same verbs on it.
	_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: selfManagedWebhook},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"},
			ResourceNames: []string{selfManagedWebhook}, Verbs: []string{"get", "list", "watch", "patch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: selfManagedWebhook},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: selfManagedWebhook},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: certSecretNamespace, Name: "vpa-inplace-admission-controller"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	port, health := freePort(t), freePort(t)
	_, err = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, selfManagedConfig(ns, port), metav1.CreateOptions{})
	require.NoError(t, err)
	startSelfManaged(t, binary, kubeconfig, port, health)

	// Ready, the caBundle patched, the Secret holding that CA.
	waitFor(t, eventually, "the self-managed admission controller ready", func(context.Context) (bool, error) {
		return readyz(health), nil
	})
	bundle := waitCABundle(t, "the caBundle patched", eventually)
	secret, err := kube.CoreV1().Secrets(certSecretNamespace).Get(ctx, certSecretName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(secret.Data["ca.crt"]), string(bundle), "caBundle is the Secret's CA bundle")
	assert.Equal(t, selfManagedWebhookSpec(ns, port), stripCABundle(getSelfManagedConfig(t).Webhooks),
		"only caBundle was patched")

	// A pod is mutated through it.
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "web", "300m", "200Mi")
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi")})
	template := dryRunPod(pods[0])
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", health)
	before := seriesAt(metricsURL, "vpa_inplace_admission_requests_total", `webhook="mutate-pods"`)
	createMutated(t, ns, template)
	assert.Greater(t, seriesAt(metricsURL, "vpa_inplace_admission_requests_total", `webhook="mutate-pods"`), before,
		"the self-managed admission controller answered the call")

	t.Run("a cleared caBundle is patched again", func(t *testing.T) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			config := getSelfManagedConfig(t)
			config.Webhooks[0].ClientConfig.CABundle = nil
			_, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, config, metav1.UpdateOptions{})
			return err
		}))
		start := time.Now()
		waitCABundle(t, "the caBundle patched again", repairWithin)
		t.Logf("caBundle patched again after %s", time.Since(start).Round(time.Millisecond))
		createMutated(t, ns, template)
	})

	t.Run("a deleted Secret, applied again, is written back with the CA in use", func(t *testing.T) {
		require.NoError(t, kube.CoreV1().Secrets(certSecretNamespace).Delete(ctx, certSecretName, metav1.DeleteOptions{}))
		// The admission controller may not create it: it keeps serving
		// until the manifests are applied again.
		time.Sleep(2 * time.Second)
		_, err := kube.CoreV1().Secrets(certSecretNamespace).Get(ctx, certSecretName, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "not created again: %v", err)
		createMutated(t, ns, template)
		shipEmptySecret(t)
		start := time.Now()
		var secret *corev1.Secret
		waitFor(t, repairWithin, "the Secret written back", func(ctx context.Context) (bool, error) {
			var err error
			secret, err = kube.CoreV1().Secrets(certSecretNamespace).Get(ctx, certSecretName, metav1.GetOptions{})
			return err == nil && len(secret.Data["ca.crt"]) > 0, nil
		})
		t.Logf("Secret written back after %s", time.Since(start).Round(time.Millisecond))
		require.NoError(t, verifyServed(port, secret.Data["ca.crt"]), "the certificate served is signed by a CA of the Secret written back")
		createMutated(t, ns, template)
	})

	t.Run("rotations fail no webhook call", func(t *testing.T) {
		// Over 2.5 rotation periods: every 300 ms, a pod is created
		// (dry run) through the webhook, and the certificate served is
		// checked against the caBundle the API server holds.
		serials := map[string]bool{}
		created, failed := 0, 0
		deadline := time.Now().Add(selfManagedValidity + selfManagedRotateBefore/2)
		for time.Now().Before(deadline) {
			bundle := getSelfManagedConfig(t).Webhooks[0].ClientConfig.CABundle
			leaf, err := servedLeaf(port)
			require.NoError(t, err)
			serials[leaf.SerialNumber.String()] = true
			assert.NoError(t, verifyLeaf(leaf, bundle), "the certificate served (serial %s) is trusted by the published caBundle", leaf.SerialNumber)
			if err := tryCreateMutated(ctx, ns, template); err != nil {
				failed++
				t.Errorf("pod creation through the webhook failed: %v", err)
			}
			created++
			time.Sleep(300 * time.Millisecond)
		}
		t.Logf("%d pods created through the webhook, %d failed, %d certificates served", created, failed, len(serials))
		assert.Zero(t, failed)
		assert.GreaterOrEqual(t, len(serials), 3, "at least two rotations in %s", selfManagedValidity+selfManagedRotateBefore/2)
	})
}

func selfManagedWebhookSpec(ns string, port int) []admissionregistrationv1.MutatingWebhook {
	return []admissionregistrationv1.MutatingWebhook{{
		Name:                    "self-managed.pods.vpa-inplace.dev",
		AdmissionReviewVersions: []string{"v1"},
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/mutate-pods", port))},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
				Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
		}},
		// Fail: a pod of the namespace is created only if the call
		// succeeded, TLS included.
		FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
		MatchPolicy:        ptr.To(admissionregistrationv1.Equivalent),
		NamespaceSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		ObjectSelector:     &metav1.LabelSelector{},
		SideEffects:        ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:     ptr.To[int32](5),
		ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
	}}
}

func selfManagedConfig(ns string, port int) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: selfManagedWebhook},
		Webhooks:   selfManagedWebhookSpec(ns, port),
	}
}

func stripCABundle(hooks []admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MutatingWebhook {
	out := make([]admissionregistrationv1.MutatingWebhook, len(hooks))
	for i, h := range hooks {
		h.ClientConfig.CABundle = nil
		out[i] = h
	}
	return out
}

func getSelfManagedConfig(t *testing.T) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	config, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), selfManagedWebhook, metav1.GetOptions{})
	require.NoError(t, err)
	return config
}

func waitCABundle(t *testing.T, what string, within time.Duration) []byte {
	t.Helper()
	var bundle []byte
	waitFor(t, within, what, func(ctx context.Context) (bool, error) {
		config, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, selfManagedWebhook, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		bundle = config.Webhooks[0].ClientConfig.CABundle
		return len(bundle) > 0, nil
	})
	return bundle
}

// shipEmptySecret creates the certificate Secret as the manifests ship it:
// no data, no type (deploy/base/admission-controller/certs-rbac).
func shipEmptySecret(t *testing.T) {
	t.Helper()
	_, err := kube.CoreV1().Secrets(certSecretNamespace).Create(ctxFor(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: certSecretName, Namespace: certSecretNamespace},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// cleanupSelfManaged removes what the test creates outside its namespace.
func cleanupSelfManaged(t *testing.T) {
	ctx := context.Background()
	for _, err := range []error{
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, selfManagedWebhook, metav1.DeleteOptions{}),
		kube.RbacV1().ClusterRoleBindings().Delete(ctx, selfManagedWebhook, metav1.DeleteOptions{}),
		kube.RbacV1().ClusterRoles().Delete(ctx, selfManagedWebhook, metav1.DeleteOptions{}),
		kube.CoreV1().Secrets(certSecretNamespace).Delete(ctx, certSecretName, metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleaning up: %v", err)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startSelfManaged runs the admission controller until the test ends.
func startSelfManaged(t *testing.T, binary, kubeconfig string, port, health int) {
	t.Helper()
	logDir := env("E2E_LOG_DIR", t.TempDir())
	logFile, err := os.Create(filepath.Join(logDir, "admission-controller-self-managed.log"))
	require.NoError(t, err)
	cmd := exec.Command(binary, "--kubeconfig="+kubeconfig,
		"--cert-mode=self-managed", "--cert-hosts=127.0.0.1",
		"--cert-mutating-webhook-configurations="+selfManagedWebhook, "--cert-validating-webhook-configurations=",
		"--cert-validity="+selfManagedValidity.String(), "--cert-rotate-before="+selfManagedRotateBefore.String(),
		"--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", port), fmt.Sprintf("--address=127.0.0.1:%d", health),
		"--feature-gates=InPlace=true", "-v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Logf("self-managed admission controller: pid %d, log %s", cmd.Process.Pid, logFile.Name())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
	})
}

func readyz(port int) bool {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// dryRunPod is a pod like p, owned by the same ReplicaSet, with the
// requests before mutation.
func dryRunPod(p corev1.Pod) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		GenerateName: p.GenerateName, Labels: p.Labels, OwnerReferences: p.OwnerReferences,
	}, Spec: *p.Spec.DeepCopy()}
	pod.Spec.NodeName = ""
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl("100m", "100Mi")}
	return pod
}

// tryCreateMutated creates the pod with dryRun=All (webhooks are called,
// nothing is stored) and checks it comes back with the recommendation.
func tryCreateMutated(ctx context.Context, ns string, template *corev1.Pod) error {
	pod := template.DeepCopy()
	pod.Namespace = ns
	got, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return err
	}
	if cpu := got.Spec.Containers[0].Resources.Requests.Cpu().String(); cpu != "300m" {
		return fmt.Errorf("pod created with cpu request %s, not the recommended 300m", cpu)
	}
	return nil
}

func createMutated(t *testing.T, ns string, template *corev1.Pod) {
	t.Helper()
	require.NoError(t, tryCreateMutated(ctxFor(t), ns, template))
}

func servedLeaf(port int) (*x509.Certificate, error) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	// The chain is verified by verifyLeaf, against the published caBundle.
	conn, err := tls.DialWithDialer(dialer, "tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func verifyLeaf(leaf *x509.Certificate, bundle []byte) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("caBundle holds no certificate: %q", strings.TrimSpace(string(bundle)))
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"})
	return err
}

func verifyServed(port int, bundle []byte) error {
	leaf, err := servedLeaf(port)
	if err != nil {
		return err
	}
	return verifyLeaf(leaf, bundle)
}
