package report

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
