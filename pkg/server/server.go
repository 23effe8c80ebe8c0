// Package server holds what every binary of vpa-inplace serves besides its
// own work: one HTTP mux with /healthz, /readyz and /metrics, readiness
// conditions, and a helper that runs an http.Server until its context ends.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Paths served by NewMux.
const (
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
	MetricsPath = "/metrics"
)

// Timeouts of the plain-HTTP servers built by NewProbeServer.
const (
	probeReadHeaderTimeout = 5 * time.Second
	probeReadTimeout       = 10 * time.Second
	probeWriteTimeout      = 30 * time.Second
	probeIdleTimeout       = 90 * time.Second
)

// Check tells whether one part of the process is ready: nil means ready.
type Check interface {
	// Name names the part in /readyz output, e.g. "informers".
	Name() string
	// Ready returns nil when the part is ready, otherwise why it is not.
	Ready() error
}

// Signal is a Check that becomes ready once Set is called and stays ready.
// It is safe for concurrent use.
type Signal struct {
	name string
	set  atomic.Bool
}

var _ Check = (*Signal)(nil)

// NewSignal returns an unset Signal.
func NewSignal(name string) *Signal { return &Signal{name: name} }

// Name implements Check.
func (s *Signal) Name() string { return s.name }

// Set marks the signal ready.
func (s *Signal) Set() { s.set.Store(true) }

// Ready implements Check.
func (s *Signal) Ready() error {
	if !s.set.Load() {
		return errors.New("not ready yet")
	}
	return nil
}

// CheckFunc adapts a function to a Check.
func CheckFunc(name string, ready func() error) Check { return checkFunc{name: name, ready: ready} }

type checkFunc struct {
	name  string
	ready func() error
}

func (c checkFunc) Name() string { return c.name }
func (c checkFunc) Ready() error { return c.ready() }

// NewMux returns the mux of a binary's probe and metrics endpoint:
//
//   - /healthz answers 200 "ok" while the process serves HTTP;
//   - /readyz answers 200 when every check is ready, otherwise 503; the body
//     lists each check as "[+]name ok" or "[-]name: reason";
//   - /metrics exposes gatherer in the Prometheus text format.
func NewMux(gatherer prometheus.Gatherer, checks ...Check) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc(HealthzPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	checks = slices.Clone(checks)
	mux.HandleFunc(ReadyzPath, func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		ready := true
		for _, c := range checks {
			if err := c.Ready(); err != nil {
				ready = false
				fmt.Fprintf(&b, "[-]%s: %v\n", c.Name(), err)
				continue
			}
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name())
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			b.WriteString("not ready\n")
		} else {
			b.WriteString("ok\n")
		}
		_, _ = w.Write([]byte(b.String()))
	})
	mux.Handle(MetricsPath, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}

// ProfilingPath is the prefix of the Go runtime profiles EnableProfiling
// serves.
const ProfilingPath = "/debug/pprof/"

// EnableProfiling adds Go's runtime profiles (heap, goroutines, CPU, ...) to
// mux under ProfilingPath, as net/http/pprof serves them. A CPU profile
// cannot be longer than the server's write timeout (30 s for NewProbeServer).
func EnableProfiling(mux *http.ServeMux) {
	mux.HandleFunc(ProfilingPath, pprof.Index)
	mux.HandleFunc(ProfilingPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(ProfilingPath+"profile", pprof.Profile)
	mux.HandleFunc(ProfilingPath+"symbol", pprof.Symbol)
	mux.HandleFunc(ProfilingPath+"trace", pprof.Trace)
}

// NewProbeServer returns a plain-HTTP server for NewMux's handler with short
// timeouts.
func NewProbeServer(ctx context.Context, handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: probeReadHeaderTimeout,
		ReadTimeout:       probeReadTimeout,
		WriteTimeout:      probeWriteTimeout,
		IdleTimeout:       probeIdleTimeout,
		BaseContext:       BaseContext(ctx),
	}
}

// BaseContext returns an http.Server BaseContext that hands each request the
// values of ctx (its logger) but not its cancellation: in-flight requests
// finish during a graceful shutdown instead of failing at once.
func BaseContext(ctx context.Context) func(net.Listener) context.Context {
	base := context.WithoutCancel(ctx)
	return func(net.Listener) context.Context { return base }
}

// Serve serves srv on ln until ctx is done, then shuts srv down, giving
// in-flight requests up to shutdownTimeout. srv serves TLS when its
// TLSConfig is set (with Certificates or GetCertificate). ln is closed when
// Serve returns. It returns nil after a shutdown caused by ctx, and the
// error of the server otherwise.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, shutdownTimeout time.Duration) error {
	logger := klog.FromContext(ctx)
	// Decided before serving: serving sets up srv.TLSConfig for HTTP/2.
	useTLS := srv.TLSConfig != nil
	errc := make(chan error, 1)
	go func() {
		var err error
		if useTLS {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		errc <- err
	}()
	logger.Info("Serving", "address", ln.Addr().String(), "tls", useTLS)

	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if err != nil {
		// Requests still running after the grace period are cut off.
		_ = srv.Close()
		err = fmt.Errorf("shutting down the server on %s: %w", ln.Addr(), err)
	}
	if serveErr := <-errc; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = fmt.Errorf("serving on %s: %w", ln.Addr(), serveErr)
	}
	logger.Info("Stopped serving", "address", ln.Addr().String())
	return err
}
