package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestMux(t *testing.T) {
	reg := prometheus.NewRegistry()
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "example_things_total", Help: "Things."})
	require.NoError(t, reg.Register(counter))
	counter.Inc()
	synced := NewSignal("informers")
	var certErr error = errors.New("no certificate")
	mux := NewMux(reg, synced, CheckFunc("certificate", func() error { return certErr }))

	t.Run("healthz answers while the process serves", func(t *testing.T) {
		code, body := get(t, mux, HealthzPath)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "ok\n", body)
	})
	t.Run("readyz lists what is not ready", func(t *testing.T) {
		code, body := get(t, mux, ReadyzPath)
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Contains(t, body, "[-]informers: not ready yet")
		assert.Contains(t, body, "[-]certificate: no certificate")
	})
	t.Run("readyz needs every check", func(t *testing.T) {
		synced.Set()
		code, body := get(t, mux, ReadyzPath)
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Contains(t, body, "[+]informers ok")
	})
	t.Run("readyz is ready when all checks are", func(t *testing.T) {
		certErr = nil
		code, body := get(t, mux, ReadyzPath)
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "[+]certificate ok")
	})
	t.Run("metrics exposes the registry", func(t *testing.T) {
		code, body := get(t, mux, MetricsPath)
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "example_things_total 1")
	})
}

func TestProfiling(t *testing.T) {
	mux := NewMux(prometheus.NewRegistry())
	code, _ := get(t, mux, ProfilingPath+"heap")
	assert.Equal(t, http.StatusNotFound, code, "not served unless enabled")

	EnableProfiling(mux)
	code, body := get(t, mux, ProfilingPath+"goroutine?debug=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine profile:")
	code, body = get(t, mux, ProfilingPath+"heap?debug=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "heap profile:")
}

func TestServeStopsWithTheContext(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := NewProbeServer(ctx, NewMux(prometheus.NewRegistry()))
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, ln, time.Second) }()

	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + ln.Addr().String() + HealthzPath)
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 10*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after its context ended")
	}
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	assert.Error(t, err, "the listener is closed")
}

func TestServeReportsServerFailure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	err = Serve(ctx, NewProbeServer(ctx, http.NewServeMux()), ln, time.Second)
	assert.Error(t, err)
}
