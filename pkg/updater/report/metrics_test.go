package report

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

func TestMetricNamesFollowConventions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	m.failures.WithLabelValues("NodeCapacity")
	m.withheld.WithLabelValues("DryRun")
	m.apiErrors.WithLabelValues("500", "GET")
	m.jobDecisions.WithLabelValues("Patch", "JobTemplateUpdate")
	m.jobWrites.WithLabelValues("Accepted")
	families, err := reg.Gather()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, fam := range families {
		name := fam.GetName()
		seen[name] = true
		assert.True(t, strings.HasPrefix(name, "vpa_inplace_updater_"), name)
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotContains(t, []string{"pod", "vpa", "namespace", "job"}, l.GetName(), "%s: no per-pod, per-Job or per-VPA labels", name)
			}
		}
		switch fam.GetType().String() {
		case "COUNTER":
			assert.True(t, strings.HasSuffix(name, "_total"), name)
		case "GAUGE":
			assert.False(t, strings.HasSuffix(name, "_total"), name)
		case "HISTOGRAM":
			assert.True(t, strings.HasSuffix(name, "_seconds"), name)
		}
	}
	for _, name := range []string{MetricResizesSent, MetricInfeasibleRecords, MetricPodsPending, MetricOldestPending, MetricDecisionDuration, MetricRecommendationLag,
		MetricJobDecisions, MetricJobWrites, MetricSuspendedJobs} {
		assert.True(t, seen[name], "%s is exposed", name)
	}
}

func TestAPIErrorsByCode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/forbidden":
			w.WriteHeader(http.StatusForbidden)
		case "/conflict":
			w.WriteHeader(http.StatusConflict)
		case "/boom":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	client := &http.Client{Transport: m.InstrumentTransport(http.DefaultTransport)}
	do := func(method, path string) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	do(http.MethodGet, "/ok")
	do(http.MethodPatch, "/forbidden")
	do(http.MethodPatch, "/forbidden")
	do(http.MethodPatch, "/conflict")
	do(http.MethodGet, "/boom")

	unreachable := &http.Client{Transport: m.InstrumentTransport(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("connection refused")
	}))}
	_, err = unreachable.Get("http://apiserver.invalid/") //nolint:bodyclose // no response
	require.Error(t, err)
	cancelled := &http.Client{Transport: m.InstrumentTransport(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return nil, context.Canceled
	}))}
	_, err = cancelled.Get("http://apiserver.invalid/") //nolint:bodyclose // no response
	require.Error(t, err)

	tests := []struct {
		code, method string
		want         float64
	}{
		{"403", http.MethodPatch, 2},
		{"409", http.MethodPatch, 1},
		{"500", http.MethodGet, 1},
		{"200", http.MethodGet, 0},
		{"error", http.MethodGet, 1},
	}
	for _, tc := range tests {
		t.Run(tc.code, func(t *testing.T) {
			assert.InDelta(t, tc.want, testutil.ToFloat64(m.apiErrors.WithLabelValues(tc.code, tc.method)), 0)
		})
	}
	var nilMetrics *Metrics
	assert.Equal(t, http.DefaultTransport, nilMetrics.InstrumentTransport(http.DefaultTransport))
}

// A replica working several spans of shards binds a controller for each:
// the gauges add their snapshots up, and a controller unbound counts no
// more.
func TestGaugesAddTheControllersUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	require.NoError(t, err)
	a := m.Bind(func() GaugeSnapshot {
		return GaugeSnapshot{Records: 2, Pending: map[state.PodState]int{state.PodDeferred: 1},
			Oldest: map[state.PodState]time.Duration{state.PodDeferred: time.Minute}, Watched: 1}
	})
	m.Bind(func() GaugeSnapshot {
		return GaugeSnapshot{Records: 3, Pending: map[state.PodState]int{state.PodDeferred: 2, state.PodInProgress: 1},
			Oldest: map[state.PodState]time.Duration{state.PodDeferred: time.Second}, Paused: true, Watched: 2}
	})
	gauge := func(name string, labels ...string) float64 {
		t.Helper()
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, fam := range families {
			if fam.GetName() != name {
				continue
			}
		metrics:
			for _, metric := range fam.GetMetric() {
				for i := 0; i+1 < len(labels); i += 2 {
					found := false
					for _, l := range metric.GetLabel() {
						found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
					}
					if !found {
						continue metrics
					}
				}
				return metric.GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s %v", name, labels)
		return 0
	}
	assert.Equal(t, 5.0, gauge(MetricInfeasibleRecords))
	assert.Equal(t, 3.0, gauge(MetricPodsPending, "state", string(state.PodDeferred)))
	assert.Equal(t, 1.0, gauge(MetricPodsPending, "state", string(state.PodInProgress)))
	assert.Equal(t, 60.0, gauge(MetricOldestPending, "state", string(state.PodDeferred)))
	assert.Equal(t, 1.0, gauge(MetricPaused))
	assert.Equal(t, 3.0, gauge(MetricResizesWatched))
	a()
	assert.Equal(t, 3.0, gauge(MetricInfeasibleRecords))
	assert.Equal(t, 1.0, gauge(MetricOldestPending, "state", string(state.PodDeferred)))
}
