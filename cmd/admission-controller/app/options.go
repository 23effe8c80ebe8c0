// Package app wires the vpa-inplace admission controller: options, clients,
// informers, the webhook handler and its servers.
package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/admission"
	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/selfcert"
)

// Where the serving certificate comes from (--cert-mode).
const (
	// CertModeFiles serves --tls-cert-file and --tls-private-key-file,
	// reloaded when they change (cert-manager, a provided Secret, scripts).
	CertModeFiles = "files"
	// CertModeSelfManaged keeps a CA and serving pair in a Secret and
	// patches the CA into the named webhook configurations' caBundle.
	CertModeSelfManaged = "self-managed"
)

// Defaults of the self-managed certificate options.
const (
	DefaultCertSecretName = "vpa-inplace-admission-certs"
	// DefaultCertService is the Service whose DNS names the certificate
	// holds when --cert-hosts is not set.
	DefaultCertService = "vpa-inplace-webhook"
)

// FallbackNamespace is the admission controller's namespace when it does
// not know its own (run outside a pod): the namespace of deploy/.
const FallbackNamespace = "vpa-inplace-system"

// DefaultNamespace is the admission controller's own namespace, from the
// POD_NAMESPACE environment variable (lookup) that the Deployment sets
// through the downward API, or FallbackNamespace when it is unset: the
// default of --cert-secret-namespace, and so of the names --cert-hosts
// holds by default.
func DefaultNamespace(lookup func(string) (string, bool)) string {
	if ns, ok := lookup("POD_NAMESPACE"); ok && ns != "" {
		return ns
	}
	return FallbackNamespace
}

// Defaults of the options.
const (
	DefaultPort           = 8000
	DefaultAddress        = ":8944"
	DefaultRequestTimeout = 4 * time.Second
	DefaultKubeAPIQPS     = 20
	DefaultKubeAPIBurst   = 40
	DefaultTLSMinVersion  = "VersionTLS12"

	// maxRequestTimeout is the longest timeoutSeconds a webhook
	// configuration accepts.
	maxRequestTimeout = 30 * time.Second
)

// Options are the command line options of the admission controller.
type Options struct {
	// Kubeconfig is the path of a kubeconfig; empty means in-cluster.
	Kubeconfig   string
	KubeAPIQPS   float32
	KubeAPIBurst int

	// TLSCertFile and TLSPrivateKeyFile hold the serving key pair; both are
	// reloaded when they change.
	TLSCertFile       string
	TLSPrivateKeyFile string
	TLSMinVersion     string
	TLSCipherSuites   []string

	// CertMode is CertModeFiles or CertModeSelfManaged.
	CertMode string
	// CertSecretName and CertSecretNamespace name the Secret of the
	// self-managed certificate.
	CertSecretName, CertSecretNamespace string
	// CertHosts are its DNS names and IP addresses; empty means the
	// Service's DNS names in CertSecretNamespace.
	CertHosts []string
	// CertMutatingWebhookConfigurations and CertValidatingWebhookConfigurations
	// are the configurations whose caBundle is kept current.
	CertMutatingWebhookConfigurations, CertValidatingWebhookConfigurations []string
	// CertValidity is how long a new CA and certificate are valid;
	// CertRotateBefore how long before expiry the next ones are made.
	CertValidity, CertRotateBefore time.Duration

	// BindAddress and Port are where the webhooks are served (HTTPS).
	BindAddress string
	Port        int
	// Address is where /healthz, /readyz and /metrics are served (HTTP).
	Address string
	// Profiling serves Go runtime profiles under /debug/pprof/ on Address.
	Profiling bool

	// RequestTimeout bounds the handling of one admission request.
	RequestTimeout time.Duration
	// MaxInflightPodRequests bounds the pod reviews handled at once;
	// MaxInflightVPARequests, apart, those of each VPA endpoint;
	// MaxInflightRequestsPerNamespace the share of each that one namespace
	// may hold.
	MaxInflightPodRequests, MaxInflightVPARequests, MaxInflightRequestsPerNamespace int
	// MaxInflightRequests is deprecated: when set (above 0), it is
	// MaxInflightPodRequests.
	MaxInflightRequests int
	// MemoryLimit is the container's memory limit (a quantity); the Go
	// runtime's soft limit is set below it unless GOMEMLIMIT is set.
	MemoryLimit string

	// VPAObjectNamespace limits the controller to one namespace;
	// IgnoredVPAObjectNamespaces excludes namespaces. At most one is set.
	VPAObjectNamespace         string
	IgnoredVPAObjectNamespaces []string
	// RecordsNamespace is where the updater keeps its records: the holds
	// after harm are read there. Empty: none is read.
	RecordsNamespace string
	// RecordsPrefix begins the names of the updater's records ConfigMaps
	// (its --records-prefix): only the holds of that prefix are read.
	RecordsPrefix string

	// FeatureGate holds the InPlace gate, set by --feature-gates.
	FeatureGate featuregate.MutableFeatureGate
	// Logs is the logging configuration (-v, --vmodule, --logging-format, ...).
	Logs *logsapi.LoggingConfiguration
}

// NewOptions returns the options with their defaults.
func NewOptions() *Options {
	return &Options{
		KubeAPIQPS:                          DefaultKubeAPIQPS,
		KubeAPIBurst:                        DefaultKubeAPIBurst,
		TLSMinVersion:                       DefaultTLSMinVersion,
		CertMode:                            CertModeFiles,
		CertSecretName:                      DefaultCertSecretName,
		CertSecretNamespace:                 DefaultNamespace(os.LookupEnv),
		CertMutatingWebhookConfigurations:   []string{"vpa-inplace-pods"},
		CertValidatingWebhookConfigurations: []string{"vpa-inplace-vpas"},
		CertValidity:                        selfcert.DefaultValidity,
		CertRotateBefore:                    selfcert.DefaultRotateBefore,
		Port:                                DefaultPort,
		Address:                             DefaultAddress,
		RequestTimeout:                      DefaultRequestTimeout,
		MaxInflightPodRequests:              admission.DefaultMaxInflightPods,
		MaxInflightVPARequests:              admission.DefaultMaxInflightVPAs,
		MaxInflightRequestsPerNamespace:     admission.DefaultMaxInflightPerNamespace,
		RecordsNamespace:                    DefaultNamespace(os.LookupEnv),
		RecordsPrefix:                       records.DefaultConfigMapPrefix,
		FeatureGate:                         features.NewFeatureGate(),
		Logs:                                logsapi.NewLoggingConfiguration(),
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to a kubeconfig file. Empty: the in-cluster configuration of the pod's ServiceAccount.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Queries per second allowed to the API server (informers list and watch; target resolution may read /scale).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Burst of queries allowed to the API server above --kube-api-qps.")

	fs.StringVar(&o.CertMode, "cert-mode", o.CertMode,
		"Where the webhooks' serving certificate comes from. files: --tls-cert-file and --tls-private-key-file, reloaded when "+
			"they change. self-managed: a CA and certificate kept in Secret --cert-secret-namespace/--cert-secret-name (created "+
			"when missing, rotated before expiry), the CA patched into the caBundle of the webhook configurations named by "+
			"--cert-mutating-webhook-configurations and --cert-validating-webhook-configurations (which are never created).")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile,
		"Path to the PEM serving certificate of the webhooks (with intermediates). Required with --cert-mode=files. Reloaded when the file changes.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile,
		"Path to the PEM private key of --tls-cert-file. Required with --cert-mode=files. Reloaded when the file changes.")
	fs.StringVar(&o.CertSecretName, "cert-secret-name", o.CertSecretName,
		"--cert-mode=self-managed: name of the Secret holding the CA and the serving certificate.")
	fs.StringVar(&o.CertSecretNamespace, "cert-secret-namespace", o.CertSecretNamespace,
		"--cert-mode=self-managed: namespace of that Secret. Default: the admission controller's own namespace, from the POD_NAMESPACE "+
			"environment variable (the Deployment sets it from the downward API), or "+FallbackNamespace+" when it is unset.")
	fs.StringSliceVar(&o.CertHosts, "cert-hosts", o.CertHosts,
		"--cert-mode=self-managed: comma-separated DNS names and IP addresses of the serving certificate. Empty: "+
			DefaultCertService+".<--cert-secret-namespace>.svc and its .svc.cluster.local name. A change applies at the next rotation.")
	fs.StringSliceVar(&o.CertMutatingWebhookConfigurations, "cert-mutating-webhook-configurations", o.CertMutatingWebhookConfigurations,
		"--cert-mode=self-managed: MutatingWebhookConfigurations whose caBundle is kept current (only that field is patched).")
	fs.StringSliceVar(&o.CertValidatingWebhookConfigurations, "cert-validating-webhook-configurations", o.CertValidatingWebhookConfigurations,
		"--cert-mode=self-managed: ValidatingWebhookConfigurations whose caBundle is kept current (only that field is patched).")
	fs.DurationVar(&o.CertValidity, "cert-validity", o.CertValidity,
		"--cert-mode=self-managed: how long a new CA and serving certificate are valid.")
	fs.DurationVar(&o.CertRotateBefore, "cert-rotate-before", o.CertRotateBefore,
		"--cert-mode=self-managed: how long before the serving certificate expires the next CA and certificate are made. "+
			"The new CA is published in caBundle next to the old one, and the new certificate served "+selfcert.DefaultPublishDelay.String()+
			" after every named configuration carries it. At least "+(2*selfcert.DefaultPublishDelay+time.Second).String()+", less than --cert-validity.")
	fs.StringVar(&o.TLSMinVersion, "tls-min-version", o.TLSMinVersion,
		"Minimum TLS version of the webhook server: VersionTLS12 or VersionTLS13.")
	fs.StringSliceVar(&o.TLSCipherSuites, "tls-cipher-suites", o.TLSCipherSuites,
		"Comma-separated TLS 1.2 cipher suites of the webhook server. Empty: Go's defaults. Possible values: "+
			strings.Join(secureCipherSuiteNames(), ", ")+".")

	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress,
		"IP address the webhook server listens on. Empty: all interfaces.")
	fs.IntVar(&o.Port, "port", o.Port,
		"Port of the webhook server (HTTPS) of /validate-vpas and /mutate-pods.")
	fs.StringVar(&o.Address, "address", o.Address,
		"host:port of the plain-HTTP server of /healthz, /readyz and /metrics.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling,
		"Also serve Go runtime profiles (heap, goroutines, CPU) under /debug/pprof/ on --address. Off by default: that address has no authentication.")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout,
		"Longest time spent on one admission request; a pod whose mutation runs out of time is admitted unchanged. "+
			"Keep it below the timeoutSeconds of the webhook configurations. At most 30s.")
	fs.IntVar(&o.MaxInflightPodRequests, "max-inflight-pod-requests", o.MaxInflightPodRequests,
		"Most pod reviews (/mutate-pods) handled at once; past it a request waits up to 1s for a slot, then is answered 429 (Too Many "+
			"Requests), before its body is read, and the API server admits the pod unchanged (failurePolicy Ignore). Bounds memory: each "+
			"request may carry up to 6 MiB.")
	fs.IntVar(&o.MaxInflightVPARequests, "max-inflight-vpa-requests", o.MaxInflightVPARequests,
		"Most VPA reviews handled at once by each of /validate-vpas and /validate-vpa-quantities, apart from the pods': pods never "+
			"take the slots of VPAs, whose webhooks fail closed. Past it, as for pods: up to 1s of wait, then 429.")
	fs.IntVar(&o.MaxInflightRequestsPerNamespace, "max-inflight-requests-per-namespace", o.MaxInflightRequestsPerNamespace,
		"Most requests of one namespace that each endpoint handles at once: no namespace holds more than this share of an "+
			"endpoint. Past it, a pod is admitted unchanged (the updater resizes it later) and a VPA review is answered 429. "+
			"At most --max-inflight-pod-requests and --max-inflight-vpa-requests.")
	fs.IntVar(&o.MaxInflightRequests, "max-inflight-requests", o.MaxInflightRequests,
		"Deprecated: use --max-inflight-pod-requests (which it sets when above 0) and --max-inflight-vpa-requests.")
	_ = fs.MarkDeprecated("max-inflight-requests", "use --max-inflight-pod-requests and --max-inflight-vpa-requests")

	fs.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit,
		"The container's memory limit, e.g. 512Mi or a number of bytes (the downward API's limits.memory). The Go runtime's "+
			"soft memory limit is set to 90% of it, unless the environment sets GOMEMLIMIT. Empty: no soft limit.")

	fs.StringVar(&o.VPAObjectNamespace, "vpa-object-namespace", o.VPAObjectNamespace,
		"Only VPAs of this namespace are watched, and only pods and VPAs of this namespace are handled; "+
			"others are admitted as they are. Empty: all namespaces.")
	fs.StringSliceVar(&o.IgnoredVPAObjectNamespaces, "ignored-vpa-object-namespaces", o.IgnoredVPAObjectNamespaces,
		"Comma-separated namespaces whose pods and VPAs are admitted as they are. Not together with --vpa-object-namespace.")
	fs.StringVar(&o.RecordsNamespace, "records-namespace", o.RecordsNamespace,
		"Namespace of the updater's records (its --records-namespace): a new pod is not given values its VPA's hold after harm holds, "+
			"read from the safety records there (ConfigMaps labelled vpa-inplace.dev/records=safety, listed and watched). "+
			"Default: the admission controller's own namespace (POD_NAMESPACE), or "+FallbackNamespace+" when it is unset. "+
			"Empty: no hold is read, and new pods get the recommendation whatever the holds.")
	fs.StringVar(&o.RecordsPrefix, "records-prefix", o.RecordsPrefix,
		"Beginning of the names of the updater's records ConfigMaps (its --records-prefix: <prefix><store>-<VPA UID>): "+
			"only the holds after harm of ConfigMaps of this prefix are read, not another install's in the same --records-namespace. "+
			"The chart sets <release fullname>-records-, as for its updater.")

	o.FeatureGate.AddFlag(fs)
	logsapi.AddFlags(o.Logs, fs)
}

// Validate returns every problem of the options.
func (o *Options) Validate() []error {
	var errs []error
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be positive, got %d", o.KubeAPIBurst))
	}
	switch o.CertMode {
	case CertModeFiles:
		if o.TLSCertFile == "" {
			errs = append(errs, errors.New("--tls-cert-file is required"))
		}
		if o.TLSPrivateKeyFile == "" {
			errs = append(errs, errors.New("--tls-private-key-file is required"))
		}
	case CertModeSelfManaged:
		if o.TLSCertFile != "" || o.TLSPrivateKeyFile != "" {
			errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are not used with --cert-mode=self-managed"))
		}
		cfg := o.SelfCertConfig()
		for _, err := range cfg.Validate() {
			errs = append(errs, fmt.Errorf("--cert-mode=self-managed: %w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("--cert-mode must be %s or %s, got %q", CertModeFiles, CertModeSelfManaged, o.CertMode))
	}
	if _, err := o.tlsMinVersion(); err != nil {
		errs = append(errs, err)
	}
	if _, err := o.tlsCipherSuites(); err != nil {
		errs = append(errs, err)
	}
	if o.BindAddress != "" && net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address must be an IP address, got %q", o.BindAddress))
	}
	if o.Port < 1 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port must be between 1 and 65535, got %d", o.Port))
	}
	if _, _, err := net.SplitHostPort(o.Address); err != nil {
		errs = append(errs, fmt.Errorf("--address must be host:port: %w", err))
	}
	if o.RequestTimeout <= 0 || o.RequestTimeout > maxRequestTimeout {
		errs = append(errs, fmt.Errorf("--request-timeout must be more than 0 and at most %s, got %s", maxRequestTimeout, o.RequestTimeout))
	}
	if o.MemoryLimit != "" {
		if q, err := quantity.Parse(o.MemoryLimit); err != nil {
			errs = append(errs, fmt.Errorf("--memory-limit: %w", err))
		} else if q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("--memory-limit must be positive, got %s", o.MemoryLimit))
		}
	}
	if o.MaxInflightRequests < 0 {
		errs = append(errs, fmt.Errorf("--max-inflight-requests must not be negative, got %d", o.MaxInflightRequests))
	}
	pods := o.InflightPodRequests()
	if pods < 1 {
		errs = append(errs, fmt.Errorf("--max-inflight-pod-requests must be at least 1, got %d", pods))
	}
	if o.MaxInflightVPARequests < 1 {
		errs = append(errs, fmt.Errorf("--max-inflight-vpa-requests must be at least 1, got %d", o.MaxInflightVPARequests))
	}
	if n := o.MaxInflightRequestsPerNamespace; n < 1 || (pods >= 1 && n > pods) || (o.MaxInflightVPARequests >= 1 && n > o.MaxInflightVPARequests) {
		errs = append(errs, fmt.Errorf("--max-inflight-requests-per-namespace must be at least 1 and at most --max-inflight-pod-requests (%d) "+
			"and --max-inflight-vpa-requests (%d), got %d", pods, o.MaxInflightVPARequests, n))
	}
	if o.VPAObjectNamespace != "" && len(o.IgnoredVPAObjectNamespaces) > 0 {
		errs = append(errs, errors.New("--vpa-object-namespace and --ignored-vpa-object-namespaces are mutually exclusive"))
	}
	if err := records.ValidatePrefix(o.RecordsPrefix); err != nil {
		errs = append(errs, fmt.Errorf("--records-prefix: %w", err))
	}
	if slices.Contains(o.IgnoredVPAObjectNamespaces, "") {
		errs = append(errs, errors.New("--ignored-vpa-object-namespaces must not contain an empty name"))
	}
	if err := logsapi.Validate(o.Logs, o.FeatureGate, nil).ToAggregate(); err != nil {
		errs = append(errs, fmt.Errorf("logging: %w", err))
	}
	return errs
}

// InflightPodRequests is --max-inflight-pod-requests, or the deprecated
// --max-inflight-requests when that is set.
func (o *Options) InflightPodRequests() int {
	if o.MaxInflightRequests > 0 {
		return o.MaxInflightRequests
	}
	return o.MaxInflightPodRequests
}

// SelfCertConfig is the configuration of the self-managed certificate.
func (o *Options) SelfCertConfig() selfcert.Config {
	hosts := o.CertHosts
	if len(hosts) == 0 {
		hosts = []string{
			DefaultCertService + "." + o.CertSecretNamespace + ".svc",
			DefaultCertService + "." + o.CertSecretNamespace + ".svc.cluster.local",
		}
	}
	return selfcert.Config{
		Namespace:                       o.CertSecretNamespace,
		SecretName:                      o.CertSecretName,
		Hosts:                           hosts,
		Validity:                        o.CertValidity,
		Timing:                          selfcert.Timing{RotateBefore: o.CertRotateBefore, PublishDelay: selfcert.DefaultPublishDelay},
		MutatingWebhookConfigurations:   o.CertMutatingWebhookConfigurations,
		ValidatingWebhookConfigurations: o.CertValidatingWebhookConfigurations,
	}
}

// WebhookAddress is the listen address of the webhook server.
func (o *Options) WebhookAddress() string {
	return net.JoinHostPort(o.BindAddress, fmt.Sprint(o.Port))
}

// tlsMinVersion accepts TLS 1.2 and 1.3 only.
func (o *Options) tlsMinVersion() (uint16, error) {
	switch o.TLSMinVersion {
	case "", "VersionTLS12":
		return tls.VersionTLS12, nil
	case "VersionTLS13":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("--tls-min-version must be VersionTLS12 or VersionTLS13, got %q", o.TLSMinVersion)
}

// tlsCipherSuites maps the names of --tls-cipher-suites to IDs; only
// suites Go considers secure are accepted. Empty means Go's defaults.
func (o *Options) tlsCipherSuites() ([]uint16, error) {
	if len(o.TLSCipherSuites) == 0 {
		return nil, nil
	}
	byName := map[string]uint16{}
	for _, s := range tls12CipherSuites() {
		byName[s.Name] = s.ID
	}
	ids := make([]uint16, 0, len(o.TLSCipherSuites))
	for _, name := range o.TLSCipherSuites {
		id, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("--tls-cipher-suites: %q is not a supported secure cipher suite", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func secureCipherSuiteNames() []string {
	var names []string
	for _, s := range tls12CipherSuites() {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// tls12CipherSuites are the secure suites that can be configured: those of
// TLS 1.2 (TLS 1.3 suites are not configurable).
func tls12CipherSuites() []*tls.CipherSuite {
	var out []*tls.CipherSuite
	for _, s := range tls.CipherSuites() {
		if slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
			out = append(out, s)
		}
	}
	return out
}
