package app

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
)

func parse(t *testing.T, args ...string) (*Options, *pflag.FlagSet) {
	t.Helper()
	opts := NewOptions()
	fs := pflag.NewFlagSet("admission-controller", pflag.ContinueOnError)
	opts.AddFlags(fs)
	require.NoError(t, fs.Parse(args))
	return opts, fs
}

func TestDefaults(t *testing.T) {
	opts, _ := parse(t)
	assert.Equal(t, 8000, opts.Port)
	assert.Equal(t, ":8944", opts.Address)
	assert.Equal(t, ":8000", opts.WebhookAddress())
	assert.Equal(t, 4*time.Second, opts.RequestTimeout)
	assert.False(t, opts.FeatureGate.Enabled(features.InPlace), "InPlace is off by default")
	assert.Empty(t, opts.Kubeconfig)
	errs := opts.Validate()
	require.Len(t, errs, 2, "only the key pair is missing: %v", errs)
	assert.ErrorContains(t, errs[0], "--tls-cert-file is required")
	assert.ErrorContains(t, errs[1], "--tls-private-key-file is required")
}

func TestFlags(t *testing.T) {
	opts, _ := parse(t,
		"--kubeconfig=/etc/kube/config", "--kube-api-qps=7.5", "--kube-api-burst=15",
		"--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key",
		"--tls-min-version=VersionTLS13", "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"--bind-address=127.0.0.1", "--port=18443", "--address=127.0.0.1:18944", "--request-timeout=2s",
		"--feature-gates=InPlace=true,CPUStartupBoost=true", "--ignored-vpa-object-namespaces=kube-system,vpa-inplace-system", "-v=4")
	assert.Equal(t, "/etc/kube/config", opts.Kubeconfig)
	assert.Equal(t, float32(7.5), opts.KubeAPIQPS)
	assert.Equal(t, 15, opts.KubeAPIBurst)
	assert.Equal(t, "127.0.0.1:18443", opts.WebhookAddress())
	assert.Equal(t, "127.0.0.1:18944", opts.Address)
	assert.Equal(t, 2*time.Second, opts.RequestTimeout)
	assert.True(t, opts.FeatureGate.Enabled(features.InPlace))
	assert.True(t, opts.FeatureGate.Enabled(features.CPUStartupBoost))
	assert.Equal(t, []string{"kube-system", "vpa-inplace-system"}, opts.IgnoredVPAObjectNamespaces)
	assert.EqualValues(t, 4, opts.Logs.Verbosity)
	assert.Empty(t, opts.Validate())
	v, err := opts.tlsMinVersion()
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS13), v)
	suites, err := opts.tlsCipherSuites()
	require.NoError(t, err)
	assert.Equal(t, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}, suites)
}

func TestValidate(t *testing.T) {
	keyPair := []string{"--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"port out of range", []string{"--port=70000"}, "--port must be between 1 and 65535"},
		{"address without port", []string{"--address=localhost"}, "--address must be host:port"},
		{"bind address not an IP", []string{"--bind-address=localhost"}, "--bind-address must be an IP address"},
		{"no request timeout", []string{"--request-timeout=0s"}, "--request-timeout must be more than 0"},
		{"request timeout above the webhook maximum", []string{"--request-timeout=31s"}, "at most 30s"},
		{"qps not positive", []string{"--kube-api-qps=0"}, "--kube-api-qps must be positive"},
		{"burst not positive", []string{"--kube-api-burst=0"}, "--kube-api-burst must be positive"},
		{"TLS 1.1", []string{"--tls-min-version=VersionTLS11"}, "--tls-min-version must be VersionTLS12 or VersionTLS13"},
		{"insecure cipher suite", []string{"--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA"}, "is not a supported secure cipher suite"},
		{"namespace and ignored namespaces", []string{"--vpa-object-namespace=a", "--ignored-vpa-object-namespaces=b"}, "mutually exclusive"},
		{"empty ignored namespace", []string{"--ignored-vpa-object-namespaces=a,,b"}, "must not contain an empty name"},
		{"no pod slot", []string{"--max-inflight-pod-requests=0", "--max-inflight-requests-per-namespace=1"}, "--max-inflight-pod-requests must be at least 1"},
		{"no VPA slot", []string{"--max-inflight-vpa-requests=0", "--max-inflight-requests-per-namespace=1"}, "--max-inflight-vpa-requests must be at least 1"},
		{"a namespace's share above an endpoint's bound", []string{"--max-inflight-vpa-requests=2", "--max-inflight-requests-per-namespace=3"},
			"--max-inflight-requests-per-namespace must be at least 1 and at most"},
		{"no namespace share", []string{"--max-inflight-requests-per-namespace=0"}, "--max-inflight-requests-per-namespace must be at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts, _ := parse(t, append(keyPair, tc.args...)...)
			errs := opts.Validate()
			require.Len(t, errs, 1, "%v", errs)
			assert.ErrorContains(t, errs[0], tc.want)
		})
	}
	t.Run("unknown feature gate is refused while parsing", func(t *testing.T) {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		NewOptions().AddFlags(fs)
		assert.Error(t, fs.Parse([]string{"--feature-gates=NoSuchGate=true"}))
	})
}

// Each endpoint has its own in-flight bound, and each namespace a share
// of it (issue #32); the old bound of all endpoints together, deprecated,
// sets the pods' bound.
func TestInflightFlags(t *testing.T) {
	opts, _ := parse(t)
	assert.Equal(t, 16, opts.InflightPodRequests())
	assert.Equal(t, 8, opts.MaxInflightVPARequests)
	assert.Equal(t, 4, opts.MaxInflightRequestsPerNamespace)

	opts, _ = parse(t, "--max-inflight-pod-requests=32", "--max-inflight-vpa-requests=6", "--max-inflight-requests-per-namespace=2")
	assert.Equal(t, 32, opts.InflightPodRequests())
	assert.Equal(t, 6, opts.MaxInflightVPARequests)
	assert.Equal(t, 2, opts.MaxInflightRequestsPerNamespace)

	opts, fs := parse(t, "--max-inflight-requests=24")
	assert.Equal(t, 24, opts.InflightPodRequests(), "the deprecated flag sets the pods' bound")
	assert.NotEmpty(t, fs.Lookup("max-inflight-requests").Deprecated)
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	_, fs := parse(t)
	for _, name := range []string{"kubeconfig", "kube-api-qps", "kube-api-burst", "tls-cert-file", "tls-private-key-file",
		"tls-min-version", "tls-cipher-suites", "bind-address", "port", "address", "request-timeout", "feature-gates",
		"vpa-object-namespace", "ignored-vpa-object-namespaces", "max-inflight-pod-requests", "max-inflight-vpa-requests",
		"max-inflight-requests-per-namespace", "v", "vmodule", "logging-format"} {
		assert.NotNil(t, fs.Lookup(name), "--%s is registered", name)
	}
	fs.VisitAll(func(f *pflag.Flag) {
		assert.NotEmpty(t, f.Usage, "--%s has a description", f.Name)
	})
	assert.Contains(t, fs.FlagUsages(), "InPlace=true|false (ALPHA - default=false)")
}

func TestCertModeFlags(t *testing.T) {
	t.Run("self-managed: no files, hosts from the namespace", func(t *testing.T) {
		opts, _ := parse(t, "--cert-mode=self-managed", "--cert-secret-namespace=ops")
		require.Empty(t, opts.Validate())
		cfg := opts.SelfCertConfig()
		assert.Equal(t, []string{"vpa-inplace-webhook.ops.svc", "vpa-inplace-webhook.ops.svc.cluster.local"}, cfg.Hosts)
		assert.Equal(t, "ops", cfg.Namespace)
		assert.Equal(t, DefaultCertSecretName, cfg.SecretName)
		assert.Equal(t, []string{"vpa-inplace-pods"}, cfg.MutatingWebhookConfigurations)
		assert.Equal(t, []string{"vpa-inplace-vpas"}, cfg.ValidatingWebhookConfigurations)
	})
	t.Run("self-managed: every flag", func(t *testing.T) {
		opts, _ := parse(t, "--cert-mode=self-managed", "--cert-secret-name=s", "--cert-hosts=127.0.0.1,a.b",
			"--cert-mutating-webhook-configurations=m1,m2", "--cert-validating-webhook-configurations=",
			"--cert-validity=2m", "--cert-rotate-before=1m")
		require.Empty(t, opts.Validate())
		cfg := opts.SelfCertConfig()
		assert.Equal(t, []string{"127.0.0.1", "a.b"}, cfg.Hosts)
		assert.Equal(t, "s", cfg.SecretName)
		assert.Equal(t, []string{"m1", "m2"}, cfg.MutatingWebhookConfigurations)
		assert.Empty(t, cfg.ValidatingWebhookConfigurations)
		assert.Equal(t, 2*time.Minute, cfg.Validity)
		assert.Equal(t, time.Minute, cfg.RotateBefore)
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "unknown mode", args: []string{"--cert-mode=magic"}, want: "--cert-mode must be"},
		{name: "files with self-managed", args: []string{"--cert-mode=self-managed", "--tls-cert-file=/a"}, want: "not used with"},
		{name: "rotate-before not below validity", args: []string{"--cert-mode=self-managed", "--cert-validity=1h", "--cert-rotate-before=1h"}, want: "must be longer"},
		{name: "rotate-before too short", args: []string{"--cert-mode=self-managed", "--cert-rotate-before=5s"}, want: "rotate-before must be at least"},
		{name: "bad host", args: []string{"--cert-mode=self-managed", "--cert-hosts=a b"}, want: "neither an IP address nor a DNS name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, _ := parse(t, tc.args...)
			errs := opts.Validate()
			require.NotEmpty(t, errs)
			assert.ErrorContains(t, errors.Join(errs...), tc.want)
		})
	}
}

// The self-managed certificate's Secret, and the names its certificate
// holds by default, are in the admission controller's own namespace, as the
// downward API tells it (POD_NAMESPACE), like the updater's Lease, kill
// switch and records: an install elsewhere that is not given
// --cert-secret-namespace does not look for its Secret in
// vpa-inplace-system.
func TestCertSecretNamespaceDefaultsToThePodsNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "autoscaling")
	opts, _ := parse(t, "--cert-mode=self-managed")
	require.Empty(t, opts.Validate())
	cfg := opts.SelfCertConfig()
	assert.Equal(t, "autoscaling", cfg.Namespace)
	assert.Equal(t, []string{"vpa-inplace-webhook.autoscaling.svc", "vpa-inplace-webhook.autoscaling.svc.cluster.local"}, cfg.Hosts)
	opts, _ = parse(t, "--cert-mode=self-managed", "--cert-secret-namespace=ops")
	assert.Equal(t, "ops", opts.SelfCertConfig().Namespace, "the flag wins")

	t.Setenv("POD_NAMESPACE", "")
	opts, _ = parse(t, "--cert-mode=self-managed")
	assert.Equal(t, FallbackNamespace, opts.SelfCertConfig().Namespace, "outside a pod")
}

// --records-prefix is the updater's: the holds of that prefix alone are
// read. The default is the updater's default; every name it gives must be
// valid.
func TestRecordsPrefix(t *testing.T) {
	valid := []string{"--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key"}
	opts, _ := parse(t, valid...)
	assert.Equal(t, "vpa-inplace-records-", opts.RecordsPrefix, "the updater's default")
	opts, _ = parse(t, append(valid, "--records-prefix=platform-vpa-inplace-records-")...)
	assert.Equal(t, "platform-vpa-inplace-records-", opts.RecordsPrefix)
	assert.Empty(t, opts.Validate())
	for _, bad := range []string{"", "Upper-", "-dash-first-", "under_score-", strings.Repeat("a", 250)} {
		opts, _ := parse(t, append(valid, "--records-prefix="+bad)...)
		errs := opts.Validate()
		require.Len(t, errs, 1, bad)
		assert.Contains(t, errs[0].Error(), "--records-prefix", bad)
	}
}
