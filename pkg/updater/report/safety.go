package report

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// Metrics of the watch after a resize (docs/safety-after-resize.md).
const (
	MetricResizesWatched = "vpa_inplace_updater_resizes_watched"
	MetricHarm           = "vpa_inplace_updater_resize_harm_total"
	MetricReverts        = "vpa_inplace_updater_resizes_reverted_total"
	MetricHarmHolds      = "vpa_inplace_updater_harm_holds"
	MetricCanaryWaiting  = "vpa_inplace_updater_pods_waiting_for_canary"
)

// Directions of a harmful resize (label of MetricHarm).
const (
	directionLowered = "Lowered"
	directionRaised  = "Raised"
)

// safetyMetrics are the counters and gauges of the watch after a resize.
type safetyMetrics struct {
	harm    *prometheus.CounterVec
	reverts prometheus.Counter
	gauges  *safetyGauges
}

func newSafetyMetrics(snapshot func() *GaugeSnapshot) *safetyMetrics {
	m := &safetyMetrics{
		harm: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricHarm,
			Help: "Harm seen on pods within the window after their resize, by harm (OOMKilled, Restarted, NotReady, Evicted) and direction: Lowered (the resize lowered values: the pod is resized back, the values held for its VPA), Raised (reported only).",
		}, []string{"harm", "direction"}),
		reverts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricReverts,
			Help: "Pods resized back in place after harm followed a resize that lowered their values.",
		}),
		gauges: &safetyGauges{
			snapshot: snapshot,
			watched: prometheus.NewDesc(MetricResizesWatched,
				"Pods watched after their resize: from the resize sent until its window (--resize-observation-window) ends, harm is seen, or the pod goes.", nil, nil),
			holds: prometheus.NewDesc(MetricHarmHolds,
				"InPlace VPAs with a hold after harm: values no pod of the VPA is lowered to until the recommendation rises above them or --harm-hold passes.", nil, nil),
			waiting: prometheus.NewDesc(MetricCanaryWaiting,
				"Pods whose decrease waits for their VPA's canaries to be watched for their window without harm.", nil, nil),
		},
	}
	for _, kind := range resize.HarmKinds {
		for _, dir := range []string{directionLowered, directionRaised} {
			m.harm.WithLabelValues(string(kind), dir)
		}
	}
	return m
}

func (m *safetyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.harm, m.reverts, m.gauges}
}

// Harmed counts harm seen after a resize that lowered values (lowered) or
// only raised them.
func (m *Metrics) Harmed(kind resize.HarmKind, lowered bool) {
	if m == nil {
		return
	}
	dir := directionRaised
	if lowered {
		dir = directionLowered
	}
	m.safety.harm.WithLabelValues(string(kind), dir).Inc()
}

// Reverted counts a pod resized back after harm.
func (m *Metrics) Reverted() {
	if m == nil {
		return
	}
	m.safety.reverts.Inc()
}

// safetyGauges reads the gauges of the watch from the controller's
// snapshot at scrape time.
type safetyGauges struct {
	snapshot                func() *GaugeSnapshot
	watched, holds, waiting *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (g *safetyGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.watched
	ch <- g.holds
	ch <- g.waiting
}

// Collect implements prometheus.Collector.
func (g *safetyGauges) Collect(ch chan<- prometheus.Metric) {
	var s GaugeSnapshot
	if p := g.snapshot(); p != nil {
		s = *p
	}
	ch <- prometheus.MustNewConstMetric(g.watched, prometheus.GaugeValue, float64(s.Watched))
	ch <- prometheus.MustNewConstMetric(g.holds, prometheus.GaugeValue, float64(s.HarmHolds))
	ch <- prometheus.MustNewConstMetric(g.waiting, prometheus.GaugeValue, float64(s.CanaryWaiting))
}
