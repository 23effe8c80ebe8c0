package updater

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpa-inplace/vpa-inplace/pkg/infeasible"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// Metric names.
const (
	MetricDecisions         = "vpa_inplace_updater_decisions_total"
	MetricResizesSent       = "vpa_inplace_updater_resizes_sent_total"
	MetricResizeFailures    = "vpa_inplace_updater_resize_failures_total"
	MetricInfeasibleRecords = "vpa_inplace_updater_infeasible_records"
)

// Metrics are the updater's Prometheus metrics. None is labelled per pod.
type Metrics struct {
	decisions *prometheus.CounterVec
	sent      prometheus.Counter
	failures  *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them, with a gauge of the
// records held by store, on reg.
func NewMetrics(reg prometheus.Registerer, store infeasible.Store) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDecisions, Help: "Decisions taken for pods, by action and reason.",
		}, []string{"action", "reason"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricResizesSent, Help: "Resize patches accepted by the API server.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricResizeFailures, Help: "Resize patches refused or failed, by outcome (NodeCapacity, Invalid, Conflict, Transient).",
		}, []string{"outcome"}),
	}
	records := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricInfeasibleRecords, Help: "Pods whose last resize attempt is recorded as infeasible or invalid.",
	}, func() float64 { return float64(store.Len()) })
	for _, c := range []prometheus.Collector{m.decisions, m.sent, m.failures, records} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) decided(d resize.Decision) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(string(d.Action), string(d.Reason)).Inc()
}

func (m *Metrics) patched(o resize.Outcome) {
	if m == nil {
		return
	}
	if o == resize.OutcomeAccepted {
		m.sent.Inc()
		return
	}
	m.failures.WithLabelValues(string(o)).Inc()
}
