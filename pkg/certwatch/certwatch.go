// Package certwatch serves a TLS key pair from files and reloads it when the
// files change, so that a rotated certificate is used without a restart.
//
// Changes are noticed through file system notifications on the directories
// of the two files (which also catches the atomic symlink swap that the
// kubelet does when a mounted Secret changes) and, as a safety net for file
// systems without notifications, by re-reading the files every poll
// interval. A pair that cannot be loaded (for example the certificate
// written before its key) is logged and the previous pair stays in use until
// a later change completes it.
package certwatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

// DefaultPollInterval is how often the files are re-read when no file system
// notification arrives.
const DefaultPollInterval = time.Minute

// Watcher holds the current key pair. Use GetCertificate in a tls.Config.
type Watcher struct {
	certFile, keyFile string
	pollInterval      time.Duration
	// notify is false in tests that exercise polling alone.
	notify bool
	// following is closed once Run follows the files: a change made after
	// it is seen (tests wait for it before they change the files).
	following     chan struct{}
	followingOnce sync.Once

	current atomic.Pointer[tls.Certificate]

	mu              sync.Mutex // serializes reloads
	certPEM, keyPEM []byte     // contents of the loaded pair
}

// New loads the key pair from certFile and keyFile and returns a Watcher
// serving it. It fails when the pair cannot be loaded. pollInterval <= 0
// means DefaultPollInterval. Call Run to follow changes.
func New(certFile, keyFile string, pollInterval time.Duration) (*Watcher, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("both a certificate file and a key file are required")
	}
	if pollInterval <= 0 {
		pollInterval = DefaultPollInterval
	}
	w := &Watcher{certFile: certFile, keyFile: keyFile, pollInterval: pollInterval, notify: true, following: make(chan struct{})}
	if _, err := w.Reload(); err != nil {
		return nil, err
	}
	return w, nil
}

// GetCertificate returns the current key pair; it fits
// tls.Config.GetCertificate.
func (w *Watcher) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := w.current.Load()
	if cert == nil {
		return nil, errors.New("no serving certificate loaded")
	}
	return cert, nil
}

// Name implements server.Check.
func (w *Watcher) Name() string { return "certificate" }

// Ready implements server.Check: ready once a key pair is loaded.
func (w *Watcher) Ready() error {
	if w.current.Load() == nil {
		return errors.New("no serving certificate loaded")
	}
	return nil
}

// Reload reads both files and, when their contents changed and form a valid
// pair, makes it current. It reports whether the pair changed.
func (w *Watcher) Reload() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	certPEM, err := os.ReadFile(w.certFile)
	if err != nil {
		return false, fmt.Errorf("reading certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(w.keyFile)
	if err != nil {
		return false, fmt.Errorf("reading private key: %w", err)
	}
	if w.current.Load() != nil && bytes.Equal(certPEM, w.certPEM) && bytes.Equal(keyPEM, w.keyPEM) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("loading key pair from %s and %s: %w", w.certFile, w.keyFile, err)
	}
	w.certPEM, w.keyPEM = certPEM, keyPEM
	w.current.Store(&cert)
	return true, nil
}

// Run follows changes of the files until ctx is done. It falls back to
// polling alone when file system notifications are not available.
func (w *Watcher) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("certFile", w.certFile, "keyFile", w.keyFile)
	ctx = klog.NewContext(ctx, logger)

	var events <-chan fsnotify.Event
	var errs <-chan error
	if w.notify {
		notifier, err := w.newNotifier()
		if err != nil {
			logger.Error(err, "Cannot watch the certificate files, polling them instead", "pollInterval", w.pollInterval)
		} else {
			defer func() { _ = notifier.Close() }()
			events, errs = notifier.Events, notifier.Errors
		}
	}

	ticker := time.NewTicker(w.pollInterval)
	defer ticker.Stop()
	w.followingOnce.Do(func() { close(w.following) })
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			logger.V(4).Info("Certificate directory changed", "event", ev.String())
			w.reload(ctx)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			logger.Error(err, "Watching the certificate files")
		case <-ticker.C:
			w.reload(ctx)
		}
	}
}

func (w *Watcher) reload(ctx context.Context) {
	logger := klog.FromContext(ctx)
	changed, err := w.Reload()
	if err != nil {
		logger.Error(err, "Cannot reload the serving certificate, keeping the current one")
		return
	}
	if changed {
		cert := w.current.Load()
		if cert != nil && cert.Leaf != nil {
			logger.Info("Reloaded the serving certificate", "notAfter", cert.Leaf.NotAfter, "serial", cert.Leaf.SerialNumber.String())
		} else {
			logger.Info("Reloaded the serving certificate")
		}
	}
}

// newNotifier watches the directories holding the two files: the files
// themselves may be symlinks that are replaced, not written.
func (w *Watcher) newNotifier() (*fsnotify.Watcher, error) {
	notifier, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("creating file watcher: %w", err)
	}
	seen := map[string]bool{}
	for _, f := range []string{w.certFile, w.keyFile} {
		dir := filepath.Dir(f)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if err := notifier.Add(dir); err != nil {
			_ = notifier.Close()
			return nil, fmt.Errorf("watching %s: %w", dir, err)
		}
	}
	return notifier, nil
}
