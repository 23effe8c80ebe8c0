// Package scrapelabels checks that a binary's metrics keep their label
// names when Prometheus scrapes them through a Prometheus Operator
// ServiceMonitor or PodMonitor.
package scrapelabels

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TargetLabels are the labels a ServiceMonitor scrape puts on every series
// (the Prometheus Operator's target labels, and Prometheus's own job and
// instance). A metric's own label of one of these names is renamed
// exported_<name> at the scrape (honorLabels false, the default), so rules
// and dashboards that use it by its name match nothing, or match the
// target's value.
var TargetLabels = []string{"job", "instance", "namespace", "service", "pod", "container", "endpoint"}

// Check gathers reg and fails when a label of any series is one of
// TargetLabels, or when one of the families in want is not gathered (a
// labelled metric has no series until a label combination is used: the
// caller initialises them first, or the check would pass vacuously).
func Check(t *testing.T, reg prometheus.Gatherer, want ...string) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotContains(t, TargetLabels, l.GetName(),
					"metric %s has a label %q, which a ServiceMonitor scrape renames exported_%s", f.GetName(), l.GetName(), l.GetName())
			}
		}
	}
	for _, name := range want {
		assert.True(t, seen[name], "metric %s is not gathered: its labels were not checked", name)
	}
}
