package buckets

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics of the node room reserved through the API.
const (
	// MetricReservations counts the reservations written.
	MetricReservations = "vpa_inplace_updater_noderoom_reservations_total"
	// MetricConflicts counts the writes of a bucket refused for a stale
	// version (another replica wrote it meanwhile): read again, and
	// decided again.
	MetricConflicts = "vpa_inplace_updater_noderoom_conflicts_total"
	// MetricRefused counts the reservations refused, by reason: no-room,
	// bucket-full, conflicts, error. The resize waits.
	MetricRefused = "vpa_inplace_updater_noderoom_refused_total"
	// MetricRemoved counts the entries this replica removed from the
	// buckets, by reason: released, shown, expired, invalid.
	MetricRemoved = "vpa_inplace_updater_noderoom_removed_total"
	// MetricHeld is how many reservations this replica holds.
	MetricHeld = "vpa_inplace_updater_noderoom_reservations"
)

// Metrics are the node room reservations' metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	reservations prometheus.Counter
	conflicts    prometheus.Counter
	refusals     *prometheus.CounterVec
	removals     *prometheus.CounterVec
	count        atomic.Pointer[func() int]
	gauge        prometheus.GaugeFunc
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reservations: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricReservations,
			Help: "Node room reservations this updater replica wrote into the node room buckets before sending a fits-node resize (--shards above 1)."}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricConflicts,
			Help: "Writes of a node room bucket refused because another replica wrote it since it was read: read again and decided again."}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRefused,
			Help: "Node room reservations refused, by reason (no-room, bucket-full, conflicts, error): the resize waits."}, []string{"reason"}),
		removals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRemoved,
			Help: "Entries this updater replica removed from the node room buckets, by reason: released (the resize was not sent, refused or failed, or its pod went), shown (the node view shows it), expired, invalid."}, []string{"reason"}),
	}
	m.gauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricHeld,
		Help: "Node room reservations this updater replica holds in the node room buckets."}, func() float64 {
		if count := m.count.Load(); count != nil {
			return float64((*count)())
		}
		return 0
	})
	for _, reason := range []string{RefusedNoRoom, RefusedBucketFull, RefusedConflicts, RefusedError} {
		m.refusals.WithLabelValues(reason)
	}
	for _, reason := range []string{removedReleased, removedShown, removedExpired, removedInvalid} {
		m.removals.WithLabelValues(reason)
	}
	for _, c := range []prometheus.Collector{m.reservations, m.conflicts, m.refusals, m.removals, m.gauge} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) held(count func() int) {
	if m != nil {
		m.count.Store(&count)
	}
}

func (m *Metrics) reserved() {
	if m != nil {
		m.reservations.Inc()
	}
}

func (m *Metrics) conflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) removedEntry(reason string) {
	if m != nil {
		m.removals.WithLabelValues(reason).Inc()
	}
}
