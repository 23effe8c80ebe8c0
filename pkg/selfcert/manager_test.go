package selfcert

import (
	"context"
	"crypto/x509"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/server"
)

var _ server.Check = (*Manager)(nil)

const (
	mutatingName   = "vpa-inplace-pods"
	validatingName = "vpa-inplace-vpas"
)

func mutatingConfig() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: mutatingName, Labels: map[string]string{"app": "x"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pods.vpa-inplace.github.io",
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/mutate-pods")},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
}

func validatingConfig() *admissionregistrationv1.ValidatingWebhookConfiguration {
	hook := func(name, path string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: testNS, Name: "vpa-inplace-webhook", Path: ptr.To(path), Port: ptr.To[int32](443),
			}},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			SideEffects:   ptr.To(admissionregistrationv1.SideEffectClassNone),
		}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: validatingName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("vpas.vpa-inplace.github.io", "/validate-vpas"),
			hook("vpa-quantities.vpa-inplace.github.io", "/validate-vpa-quantities"),
		},
	}
}

// configBundles returns the caBundle of every webhook of both
// configurations, read from the API.
func configBundles(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	ctx := context.Background()
	mut, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutatingName, metav1.GetOptions{})
	require.NoError(t, err)
	val, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, validatingName, metav1.GetOptions{})
	require.NoError(t, err)
	var out []string
	for _, w := range mut.Webhooks {
		out = append(out, string(w.ClientConfig.CABundle))
	}
	for _, w := range val.Webhooks {
		out = append(out, string(w.ClientConfig.CABundle))
	}
	return out
}

func allEqual(got []string, want string) bool {
	for _, g := range got {
		if g != want {
			return false
		}
	}
	return len(got) > 0
}

// trusted tells whether the bundle verifies the certificate the manager
// serves, as an API server holding that caBundle would.
func trusted(t *testing.T, m *Manager, bundle string) bool {
	t.Helper()
	cert, err := m.GetCertificate(nil)
	if err != nil {
		return false
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(bundle)) {
		return false
	}
	_, err = cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: cert.Leaf.NotBefore.Add(time.Minute)})
	return err == nil
}

const eventually, tick = time.Minute, 5 * time.Millisecond

// managerTiming rotates at two thirds of the validity, so that the old CA
// expires (and is trimmed) well before the next rotation.
var managerTiming = Timing{RotateBefore: 20 * time.Minute, PublishDelay: 10 * time.Second}

func startManager(t *testing.T, client *fake.Clientset, clk *testingclock.FakeClock) *Manager {
	t.Helper()
	m, err := New(client, Config{
		Namespace: testNS, SecretName: testSecret, Hosts: hosts, Validity: validity, Timing: managerTiming,
		MutatingWebhookConfigurations: []string{mutatingName}, ValidatingWebhookConfigurations: []string{validatingName},
		Clock: clk,
	})
	require.NoError(t, err)
	require.Error(t, m.Ready(), "not ready before a certificate is loaded")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, m.Run(ctx)) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return m
}

// The whole life of the certificate on a fake cluster and a fake clock:
// created, published, repaired, rotated in two steps, old CA retired.
func TestManagerLifecycle(t *testing.T) {
	client, _ := newVersionedClient(t)
	ctx := context.Background()
	_, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mutatingConfig(), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, validatingConfig(), metav1.CreateOptions{})
	require.NoError(t, err)
	clk := testingclock.NewFakeClock(t0)
	m := startManager(t, client, clk)

	// Created, served, published.
	require.Eventually(t, func() bool { return m.Ready() == nil }, eventually, tick)
	first := stored(t, client)
	require.Eventually(t, func() bool { return allEqual(configBundles(t, client), string(first.Bundle())) }, eventually, tick)
	assert.True(t, trusted(t, m, string(first.Bundle())))

	// Nothing but caBundle changed.
	mut, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutatingName, metav1.GetOptions{})
	require.NoError(t, err)
	want := mutatingConfig()
	want.Webhooks[0].ClientConfig.CABundle = first.Bundle()
	assert.Equal(t, want.Webhooks, mut.Webhooks)
	assert.Equal(t, want.Labels, mut.Labels)
	val, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, validatingName, metav1.GetOptions{})
	require.NoError(t, err)
	wantVal := validatingConfig()
	for i := range wantVal.Webhooks {
		wantVal.Webhooks[i].ClientConfig.CABundle = first.Bundle()
	}
	assert.Equal(t, wantVal.Webhooks, val.Webhooks)

	// Someone resets a caBundle: patched again.
	val.Webhooks[1].ClientConfig.CABundle = nil
	_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, val, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return allEqual(configBundles(t, client), string(first.Bundle())) }, eventually, tick)

	// Due: staged; both CAs published; the old pair still served.
	clk.SetTime(t0.Add(validity - managerTiming.RotateBefore))
	var staged *State
	require.Eventually(t, func() bool {
		staged = stored(t, client)
		return staged.Staged() && allEqual(configBundles(t, client), string(staged.Bundle()))
	}, eventually, tick)
	require.Len(t, staged.cas, 2)
	served, err := m.GetCertificate(nil)
	require.NoError(t, err)
	assert.Equal(t, first.current.tls.Leaf.Raw, served.Leaf.Raw, "the new pair is not served within the publish delay")
	assert.True(t, trusted(t, m, string(staged.Bundle())))

	// Publish delay over: the new pair is served, trusted by the bundle the
	// configurations hold.
	clk.Step(managerTiming.PublishDelay)
	require.Eventually(t, func() bool {
		cert, err := m.GetCertificate(nil)
		return err == nil && string(cert.Leaf.Raw) == string(staged.next.tls.Leaf.Raw)
	}, eventually, tick)
	assert.True(t, trusted(t, m, configBundles(t, client)[0]))
	assert.False(t, stored(t, client).Staged())

	// The old CA expires: dropped from the Secret and the configurations.
	clk.SetTime(t0.Add(validity + time.Second))
	require.Eventually(t, func() bool {
		st := stored(t, client)
		return len(st.cas) == 1 && allEqual(configBundles(t, client), string(st.Bundle()))
	}, eventually, tick)
	assert.True(t, trusted(t, m, configBundles(t, client)[0]))

	// The Secret deleted: written back with what is served.
	require.NoError(t, client.CoreV1().Secrets(testNS).Delete(ctx, testSecret, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Secrets(testNS).Get(ctx, testSecret, metav1.GetOptions{})
		return err == nil
	}, eventually, tick)
	cert, err := m.GetCertificate(nil)
	require.NoError(t, err)
	assert.Equal(t, cert.Leaf.Raw, stored(t, client).current.tls.Leaf.Raw)
}

// A configuration that does not exist is never created, and holds nothing
// up; once created (with an empty caBundle) it is patched.
func TestMissingConfigurationIsNotCreated(t *testing.T) {
	client, _ := newVersionedClient(t)
	ctx := context.Background()
	m := startManager(t, client, testingclock.NewFakeClock(t0))
	require.Eventually(t, func() bool { return m.Ready() == nil }, eventually, tick)
	list, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items)

	_, err = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mutatingConfig(), metav1.CreateOptions{})
	require.NoError(t, err)
	bundle := string(stored(t, client).Bundle())
	require.Eventually(t, func() bool {
		mut, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutatingName, metav1.GetOptions{})
		return err == nil && string(mut.Webhooks[0].ClientConfig.CABundle) == bundle
	}, eventually, tick)
}

// A patch never lands on another webhook than the one it was computed for.
func TestCABundlePatchIsGuardedByTheWebhookName(t *testing.T) {
	client := fake.NewClientset(validatingConfig())
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	stale := validatingConfig()
	// The cache lists the webhooks in another order than the API holds.
	stale.Webhooks[0], stale.Webhooks[1] = stale.Webhooks[1], stale.Webhooks[0]
	stale.Webhooks[1].ClientConfig.CABundle = []byte("x")
	require.NoError(t, store.Add(stale))
	err := patchCABundles(context.Background(), client, []webhookConfig{{name: validatingName, store: store}}, []byte("x"))
	require.Error(t, err)
	got, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), validatingName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, validatingConfig().Webhooks, got.Webhooks, "nothing patched")
}

func TestConfigValidate(t *testing.T) {
	good := Config{Namespace: testNS, SecretName: testSecret, Hosts: hosts, Validity: validity, Timing: timing}
	require.Empty(t, good.Validate())
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{name: "no hosts", edit: func(c *Config) { c.Hosts = nil }},
		{name: "bad host", edit: func(c *Config) { c.Hosts = []string{"not a host"} }},
		{name: "bad Secret name", edit: func(c *Config) { c.SecretName = "Bad_Name" }},
		{name: "bad configuration name", edit: func(c *Config) { c.ValidatingWebhookConfigurations = []string{"x/y"} }},
		{name: "rotate-before within two publish delays", edit: func(c *Config) { c.RotateBefore = 2 * c.PublishDelay }},
		{name: "validity not longer than rotate-before", edit: func(c *Config) { c.Validity = c.RotateBefore }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			assert.NotEmpty(t, c.Validate())
		})
	}
}

// Two replicas starting at once serve one certificate, and rotate to the
// same next one.
func TestTwoReplicasServeOneCertificate(t *testing.T) {
	client, _ := newVersionedClient(t)
	ctx := context.Background()
	_, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mutatingConfig(), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, validatingConfig(), metav1.CreateOptions{})
	require.NoError(t, err)
	clk := testingclock.NewFakeClock(t0)
	a, b := startManager(t, client, clk), startManager(t, client, clk)
	sameAsSecret := func() bool {
		secret, err := client.CoreV1().Secrets(testNS).Get(ctx, testSecret, metav1.GetOptions{})
		if err != nil {
			return false
		}
		st, err := parseState(secret.Data, secret.Annotations)
		if err != nil {
			return false
		}
		for _, m := range []*Manager{a, b} {
			cert, err := m.GetCertificate(nil)
			if err != nil || string(cert.Leaf.Raw) != string(st.current.tls.Leaf.Raw) {
				return false
			}
		}
		return allEqual(configBundles(t, client), string(st.Bundle()))
	}
	require.Eventually(t, sameAsSecret, eventually, tick)
	first := stored(t, client)
	require.Len(t, first.cas, 1, "one CA, whichever replica made it")

	clk.SetTime(t0.Add(validity - managerTiming.RotateBefore))
	require.Eventually(t, func() bool { return stored(t, client).Staged() }, eventually, tick)
	require.Len(t, stored(t, client).cas, 2, "one new CA, not one per replica")
	clk.Step(managerTiming.PublishDelay)
	require.Eventually(t, func() bool { return sameAsSecret() && !stored(t, client).Staged() }, eventually, tick)
	assert.NotEqual(t, first.current.certPEM, stored(t, client).current.certPEM)
}
