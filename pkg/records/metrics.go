package records

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names. The store label is the annotation a store keeps its records
// in (AnnotationKey or MemoryAnnotationKey): two values at most.
const (
	MetricRecordsDropped = "vpa_inplace_updater_records_dropped_total"
	MetricWriteFailures  = "vpa_inplace_updater_records_write_failures_total"
)

// Write failure reasons, the reason label of MetricWriteFailures.
const (
	// WriteTooLarge: the API server refused the VPA's annotations as too
	// large (422 on metadata.annotations).
	WriteTooLarge = "TooLarge"
	// WriteInvalid: any other 422, e.g. a webhook refusing the VPA.
	WriteInvalid = "Invalid"
	// WriteConflict: a 409 other than a failed UID precondition.
	WriteConflict = "Conflict"
	// WriteForbidden: 403, the updater's role or an admission policy.
	WriteForbidden = "Forbidden"
	// WriteOther: throttling, server errors, timeouts, connection errors.
	WriteOther = "Other"
)

// Metrics counts what the stores drop when loading and the writes that
// fail. A nil *Metrics counts nothing. One Metrics serves every store of a
// process; it must not be registered twice.
type Metrics struct {
	dropped  *prometheus.CounterVec
	failures *prometheus.CounterVec
}

// NewMetrics registers the records metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRecordsDropped,
			Help: "Records read from VPA annotations and not kept, by store (annotation) and reason (records.DropReason); a whole annotation that cannot be read counts once.",
		}, []string{"store", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWriteFailures,
			Help: "Failed writes of records onto a VPA, retried with backoff, by store (annotation) and reason: TooLarge, Invalid, Conflict, Forbidden, Other.",
		}, []string{"store", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.dropped, m.failures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering records metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) recordsDropped(store string, reason DropReason, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.dropped.WithLabelValues(store, string(reason)).Add(float64(n))
}

func (m *Metrics) writeFailed(store, reason string) {
	if m == nil {
		return
	}
	m.failures.WithLabelValues(store, reason).Inc()
}
