package owner

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics of the shards' ownership; their names are an interface the
// chart's alerts use.
const (
	// MetricShardsOwned is how many shards this replica holds.
	MetricShardsOwned = "vpa_inplace_updater_shards_owned"
	// MetricShardOwned is 1 for each shard this replica holds, 0 for the
	// others: max by shard over the replicas is 0 for a shard no one
	// holds.
	MetricShardOwned = "vpa_inplace_updater_shard_owned"
	// MetricShardSynced is 1 for each shard whose caches this replica has
	// synced and whose records it has loaded, 0 for the others.
	MetricShardSynced = "vpa_inplace_updater_shard_synced"
	// MetricShardMembers is how many live replicas this replica sees.
	MetricShardMembers = "vpa_inplace_updater_shard_members"
	// MetricShardShare is how many shards this replica's share is.
	MetricShardShare = "vpa_inplace_updater_shard_share"
	// MetricShardTransitions counts shards taken, given up and lost.
	MetricShardTransitions = "vpa_inplace_updater_shard_transitions_total"
	// MetricShardWorkLag is how long an item of a span's work queue
	// waited for a worker, under each shard of the span (work.go).
	MetricShardWorkLag = "vpa_inplace_updater_shard_work_lag_seconds"
	// MetricShardWorkLongestRunning is how long the longest running
	// worker of a span's queue has been at its item, under each shard of
	// the span (work.go).
	MetricShardWorkLongestRunning = "vpa_inplace_updater_shard_work_longest_running_seconds"
)

const (
	transitionAcquired = "acquired"
	transitionReleased = "released"
	transitionLost     = "lost"
)

// Metrics are the shards' ownership metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	shards      int
	ownedTotal  prometheus.Gauge
	owned       *prometheus.GaugeVec
	synced      *prometheus.GaugeVec
	members     prometheus.Gauge
	share       prometheus.Gauge
	transitions *prometheus.CounterVec
	// lag and longest are the work queues' (work.go), by shard and queue:
	// a series is made when a span covering its shard is first worked.
	lag     *prometheus.HistogramVec
	longest *prometheus.GaugeVec
}

// NewMetrics registers the metrics of shards shards on reg, every shard at
// 0 until held.
func NewMetrics(reg prometheus.Registerer, shards int) (*Metrics, error) {
	m := &Metrics{
		shards: shards,
		ownedTotal: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricShardsOwned,
			Help: "How many of the namespace shards this updater replica holds (a Lease each)."}),
		owned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricShardOwned,
			Help: "1 for each namespace shard this updater replica holds, 0 for the others."}, []string{"shard"}),
		synced: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricShardSynced,
			Help: "1 for each namespace shard this updater replica works: its caches synced and its records loaded; 0 for the others."}, []string{"shard"}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricShardMembers,
			Help: "How many live updater replicas share the shards, as this replica sees their membership Leases."}),
		share: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricShardShare,
			Help: "How many shards this replica's share is: the shards split evenly among the live replicas."}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricShardTransitions,
			Help: "Shards this replica took (acquired), gave up to share them (released) or lost (a renewal failed)."}, []string{"event"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricShardWorkLag,
			Help:    "How long an item of a work queue of a span of shards this replica works waited for a worker: from being queued (a pod, VPA or Job event, a resync, a retry once its backoff is over) to a worker taking it. Counted under every shard of the span, by queue: pod, vpa, condition, job.",
			Buckets: workLagBuckets}, []string{"shard", "queue"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricShardWorkLongestRunning,
			Help: "How long the longest running worker of the span's queue has been at its current item, under every shard of the span (0: none at work, or the shard not worked here); by queue: pod, vpa, condition, job."},
			[]string{"shard", "queue"}),
	}
	for _, c := range []prometheus.Collector{m.ownedTotal, m.owned, m.synced, m.members, m.share, m.transitions, m.lag, m.longest} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for i := range shards {
		m.owned.WithLabelValues(strconv.Itoa(i)).Set(0)
		m.synced.WithLabelValues(strconv.Itoa(i)).Set(0)
	}
	for _, e := range []string{transitionAcquired, transitionReleased, transitionLost} {
		m.transitions.WithLabelValues(e)
	}
	return m, nil
}

func (m *Metrics) observe(members, share int) {
	if m == nil {
		return
	}
	m.members.Set(float64(members))
	m.share.Set(float64(share))
}

func (m *Metrics) setOwned(shards int, working []int) {
	if m == nil {
		return
	}
	held := make([]bool, shards)
	for _, k := range working {
		held[k] = true
	}
	for i, h := range held {
		m.owned.WithLabelValues(strconv.Itoa(i)).Set(boolFloat(h))
	}
	m.ownedTotal.Set(float64(len(working)))
}

func (m *Metrics) transition(event string) {
	if m == nil {
		return
	}
	m.transitions.WithLabelValues(event).Inc()
}

// Synced sets whether the work of shards is ready: caches synced and
// records loaded.
func (m *Metrics) Synced(shards []int, ready bool) {
	if m == nil {
		return
	}
	for _, k := range shards {
		m.synced.WithLabelValues(strconv.Itoa(k)).Set(boolFloat(ready))
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
