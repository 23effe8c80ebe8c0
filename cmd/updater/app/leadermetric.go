package app

import (
	"github.com/prometheus/client_golang/prometheus"
)

// MetricLeader is 1 while this replica leads (holds the Lease, or runs
// without leader election) and 0 otherwise. Every replica exports it, so
// max() over the replicas says whether any leads.
const MetricLeader = "vpa_inplace_updater_leader"

// leaderGauge is the vpa_inplace_updater_leader gauge. A nil *leaderGauge
// does nothing, for callers that export no metrics.
type leaderGauge struct {
	gauge prometheus.Gauge
}

// newLeaderGauge registers the gauge on reg, at 0 until set.
func newLeaderGauge(reg prometheus.Registerer) (*leaderGauge, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricLeader,
		Help: "1 while this updater replica leads (holds the leader election Lease, or runs without leader election), 0 otherwise.",
	})
	if err := reg.Register(g); err != nil {
		return nil, err
	}
	return &leaderGauge{gauge: g}, nil
}

// set records whether this replica leads.
func (l *leaderGauge) set(leading bool) {
	if l == nil {
		return
	}
	if leading {
		l.gauge.Set(1)
	} else {
		l.gauge.Set(0)
	}
}
