package selfcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of Config.
const (
	DefaultValidity     = 90 * 24 * time.Hour
	DefaultRotateBefore = 30 * 24 * time.Hour
	DefaultPublishDelay = 10 * time.Second
)

// fieldManager names this package's writes.
const fieldManager = "vpa-inplace-admission-controller"

var metav1PatchOptions = metav1.PatchOptions{FieldManager: fieldManager}

// queueKey is the one key of the work queue: every event asks for the same
// sync.
const queueKey = "sync"

// Config says which Secret to keep, for which names, and which webhook
// configurations to keep trusting it.
type Config struct {
	// Namespace and SecretName name the Secret.
	Namespace, SecretName string
	// Hosts are the DNS names and IP addresses of the serving certificate.
	Hosts []string
	// Validity is how long a new CA and certificate are valid.
	Validity time.Duration
	Timing
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations are
	// the configurations whose caBundle is kept current.
	MutatingWebhookConfigurations, ValidatingWebhookConfigurations []string
	// Clock is the real clock when nil.
	Clock clock.WithTicker
}

// Validate returns every problem of the configuration.
func (c *Config) Validate() []error {
	var errs []error
	if c.Namespace == "" || c.SecretName == "" {
		errs = append(errs, errors.New("the Secret's namespace and name are required"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.SecretName) {
		errs = append(errs, fmt.Errorf("the Secret name %q: %s", c.SecretName, msg))
	}
	if len(c.Hosts) == 0 {
		errs = append(errs, errors.New("at least one host name is required"))
	}
	for _, h := range c.Hosts {
		if net.ParseIP(h) != nil {
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(h) {
			errs = append(errs, fmt.Errorf("host %q is neither an IP address nor a DNS name: %s", h, msg))
		}
	}
	for _, n := range append(append([]string{}, c.MutatingWebhookConfigurations...), c.ValidatingWebhookConfigurations...) {
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			errs = append(errs, fmt.Errorf("webhook configuration name %q: %s", n, msg))
		}
	}
	if c.PublishDelay < 0 {
		errs = append(errs, fmt.Errorf("the publish delay must not be negative, got %s", c.PublishDelay))
	}
	// The next pair must be staged, published and promoted before the
	// served one expires.
	if c.RotateBefore < 2*c.PublishDelay+time.Second {
		errs = append(errs, fmt.Errorf("rotate-before must be at least %s (twice the publish delay and a second), got %s",
			2*c.PublishDelay+time.Second, c.RotateBefore))
	}
	if c.Validity <= c.RotateBefore {
		errs = append(errs, fmt.Errorf("the validity (%s) must be longer than rotate-before (%s)", c.Validity, c.RotateBefore))
	}
	return errs
}

// Manager keeps the Secret, the caBundles, and the served certificate.
// Use GetCertificate in a tls.Config, Ready as a readiness check, and Run.
type Manager struct {
	client  kubernetes.Interface
	cfg     Config
	clock   clock.WithTicker
	rotator *rotator

	factories []informers.SharedInformerFactory
	configs   []webhookConfig
	queue     workqueue.TypedRateLimitingInterface[string]

	current atomic.Pointer[tls.Certificate]
}

// New returns a Manager; nothing runs before Run.
func New(client kubernetes.Interface, cfg Config) (*Manager, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	m := &Manager{
		client: client,
		cfg:    cfg,
		clock:  clk,
		rotator: &rotator{
			client: client, ns: cfg.Namespace, name: cfg.SecretName,
			hosts: cfg.Hosts, since: clk.Now(), validity: cfg.Validity, timing: cfg.Timing, clock: clk,
		},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "selfcert", Clock: clk},
		),
	}
	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { m.queue.Add(queueKey) },
		UpdateFunc: func(any, any) { m.queue.Add(queueKey) },
		DeleteFunc: func(any) { m.queue.Add(queueKey) },
	}
	// One informer per object, each restricted to its name: RBAC may then
	// grant list and watch by resourceNames.
	byName := func(name string, namespace string) informers.SharedInformerFactory {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			}))
		m.factories = append(m.factories, f)
		return f
	}
	secretInformer := byName(cfg.SecretName, cfg.Namespace).Core().V1().Secrets().Informer()
	if _, err := secretInformer.AddEventHandler(enqueue); err != nil {
		return nil, fmt.Errorf("watching Secret %s/%s: %w", cfg.Namespace, cfg.SecretName, err)
	}
	for _, name := range cfg.MutatingWebhookConfigurations {
		inf := byName(name, "").Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
		if _, err := inf.AddEventHandler(enqueue); err != nil {
			return nil, fmt.Errorf("watching MutatingWebhookConfiguration %s: %w", name, err)
		}
		m.configs = append(m.configs, webhookConfig{name: name, mutating: true, store: inf.GetStore()})
	}
	for _, name := range cfg.ValidatingWebhookConfigurations {
		inf := byName(name, "").Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()
		if _, err := inf.AddEventHandler(enqueue); err != nil {
			return nil, fmt.Errorf("watching ValidatingWebhookConfiguration %s: %w", name, err)
		}
		m.configs = append(m.configs, webhookConfig{name: name, store: inf.GetStore()})
	}
	return m, nil
}

// GetCertificate returns the served pair; it fits tls.Config.GetCertificate.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := m.current.Load()
	if cert == nil {
		return nil, errors.New("no serving certificate loaded")
	}
	return cert, nil
}

// Name implements server.Check.
func (m *Manager) Name() string { return "certificate" }

// Ready implements server.Check: ready once a pair is served.
func (m *Manager) Ready() error {
	if m.current.Load() == nil {
		return errors.New("no serving certificate loaded")
	}
	return nil
}

// Run keeps the Secret and the caBundles until ctx is done. Failed syncs
// are retried with backoff; Run returns an error only if the informers
// cannot sync.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("secret", klog.KRef(m.cfg.Namespace, m.cfg.SecretName))
	ctx = klog.NewContext(ctx, logger)
	defer m.queue.ShutDown()
	for _, f := range m.factories {
		f.StartWithContext(ctx)
	}
	defer func() {
		for _, f := range m.factories {
			f.Shutdown()
		}
	}()
	for _, f := range m.factories {
		if err := f.WaitForCacheSyncWithContext(ctx).AsError(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("waiting for the certificate informers: %w", err)
		}
	}
	go func() {
		<-ctx.Done()
		m.queue.ShutDown()
	}()
	m.queue.Add(queueKey)
	for m.processNext(ctx) {
	}
	return nil
}

func (m *Manager) processNext(ctx context.Context) bool {
	key, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(key)
	wait, err := m.sync(ctx)
	if err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Keeping the webhook certificate, will retry")
		}
		m.queue.AddRateLimited(key)
		return true
	}
	m.queue.Forget(key)
	if wait > 0 {
		m.queue.AddAfter(key, wait)
	}
	return true
}

// sync brings the Secret up to date, serves its pair, and patches the
// caBundles that differ from its bundle.
func (m *Manager) sync(ctx context.Context) (time.Duration, error) {
	st, wait, err := m.rotator.sync(ctx, func(bundle []byte) bool { return published(m.configs, bundle) })
	if err != nil {
		return 0, err
	}
	if cert, prev := st.Certificate(), m.current.Load(); prev == nil || !bytes.Equal(prev.Leaf.Raw, cert.Leaf.Raw) {
		m.current.Store(cert)
		klog.FromContext(ctx).Info("Serving certificate", "serial", cert.Leaf.SerialNumber.String(),
			"notAfter", cert.Leaf.NotAfter, "rotationStaged", st.Staged())
	}
	if err := patchCABundles(ctx, m.client, m.configs, st.Bundle()); err != nil {
		return 0, err
	}
	return wait, nil
}
