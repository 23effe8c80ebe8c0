package records

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names. The store label is the store (StoreInfeasible or
// StoreMemory for a ConfigMapStore, the annotation for a VPAStore): two
// values at most.
const (
	MetricRecordsDropped = "vpa_inplace_updater_records_dropped_total"
	MetricWriteFailures  = "vpa_inplace_updater_records_write_failures_total"
	MetricNotDurable     = "vpa_inplace_updater_records_not_durable"
)

// Reasons of MetricNotDurable: why records are held in memory only.
const (
	// NotDurableWriteFailing: the last write of their VPA's records failed;
	// it is retried with backoff.
	NotDurableWriteFailing = "WriteFailing"
	// NotDurableLeftOut: left out of their VPA's full ConfigMap (its size,
	// MaxCompactEntries or MaxCompactAttempts), the oldest first.
	NotDurableLeftOut = "LeftOut"
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
	dropped    *prometheus.CounterVec
	failures   *prometheus.CounterVec
	notDurable *prometheus.GaugeVec
}

// NewMetrics registers the records metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRecordsDropped,
			Help: "Records read (from ConfigMaps, or the annotations they are moved from) and not kept, or not believed at a pod's sync (NotOwned), by store and reason (records.DropReason); a whole value that cannot be read counts once.",
		}, []string{"store", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWriteFailures,
			Help: "Failed writes of records (a VPA's ConfigMap, or the annotation they are moved from), retried with backoff, by store and reason: TooLarge, Invalid, Conflict, Forbidden, Other.",
		}, []string{"store", "reason"}),
		notDurable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricNotDurable,
			Help: "Records held in memory only, lost at a restart or a change of leader (whose resizes are then tried once more), by store and reason: WriteFailing (their VPA's write keeps failing), LeftOut (left out of a full ConfigMap).",
		}, []string{"store", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.dropped, m.failures, m.notDurable} {
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

// setNotDurable sets the records of store held in memory only.
func (m *Metrics) setNotDurable(store string, failing, leftOut int) {
	if m == nil {
		return
	}
	m.notDurable.WithLabelValues(store, NotDurableWriteFailing).Set(float64(failing))
	m.notDurable.WithLabelValues(store, NotDurableLeftOut).Set(float64(leftOut))
}
