package admission

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/scrapelabels"
)

// The admission controller's metrics are scraped through the chart's
// ServiceMonitor: none of their labels may be one the scrape sets on the
// target (endpoint, namespace, pod, ...), or the alerts that use it break.
// Every labelled metric is initialised with all its label values, so every
// label is gathered.
func TestMetricLabelsSurviveAServiceMonitorScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := NewMetrics(reg)
	require.NoError(t, err)
	scrapelabels.Check(t, reg, MetricRequests, MetricRequestDuration, MetricPodMutationErrors, MetricVPARejections, MetricStartupBoosts)
}
