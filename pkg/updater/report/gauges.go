package report

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// gaugeCollector computes the gauges at scrape time from the controller's
// state, so that they never drift from it.
type gaugeCollector struct {
	mu            sync.Mutex
	next          uint64
	sources       map[uint64]func() GaugeSnapshot
	records       *prometheus.Desc
	memoryRecords *prometheus.Desc
	pending       *prometheus.Desc
	oldest        *prometheus.Desc
	paused        *prometheus.Desc
	dryRun        *prometheus.Desc
	metricsAPI    *prometheus.Desc
	jobs          *prometheus.Desc
	boosted       *prometheus.Desc
	restarts      *prometheus.Desc
	roomHolds     *prometheus.Desc
}

func newGaugeCollector() *gaugeCollector {
	return &gaugeCollector{
		records: prometheus.NewDesc(MetricInfeasibleRecords,
			"Pods whose last resize attempt is recorded as infeasible or invalid, and suspended Jobs whose pod template update is recorded as refused.", nil, nil),
		memoryRecords: prometheus.NewDesc(MetricMemoryRecords,
			"Pods with a memory record: memory limits that are not lowered (the kubelet refused, or the memory in use plus the margin reached them).", nil, nil),
		metricsAPI: prometheus.NewDesc(MetricMetricsAPI,
			"1 while the metrics API (metrics.k8s.io/v1beta1) is available, so that memory limits are lowered only above the memory in use plus the margin.", nil, nil),
		pending: prometheus.NewDesc(MetricPodsPending,
			"Pods of InPlace VPAs whose recommendation waits to be applied, by state: Deferred (by the kubelet), InProgress, Error, DisruptionBudget (a restarting resize waits for the tolerance or a PodDisruptionBudget), WaitingForNodeCapacity (not sent until the node has room), Withheld (dry run or paused).",
			[]string{"state"}, nil),
		oldest: prometheus.NewDesc(MetricOldestPending,
			"How long the oldest pod in each pending state has been in it, in seconds (0 when none is).",
			[]string{"state"}, nil),
		paused: prometheus.NewDesc(MetricPaused,
			"1 while resizing is paused cluster-wide by the updater's ConfigMap.", nil, nil),
		dryRun: prometheus.NewDesc(MetricDryRun,
			"1 when the updater runs with --dry-run.", nil, nil),
		jobs: prometheus.NewDesc(MetricSuspendedJobs,
			"Suspended Jobs of InPlace VPAs, by state: TemplateUpToDate, Waiting (not mutable yet), Withheld, Rejected, Error, NoRecommendation.",
			[]string{"state"}, nil),
		restarts: prometheus.NewDesc(MetricRestartReservations,
			"Places under --eviction-tolerance and PodDisruptionBudgets held by resizes that restart containers, by state: Unconfirmed (the answer to the patch was lost; held until the pod shows it), Restarting, Pending (the pod is Ready and the kubelet has not applied the resize: Deferred or failing; held for --restart-reservation-timeout at most), Back (Ready for less than minReady).",
			[]string{"state"}, nil),
		roomHolds: prometheus.NewDesc(MetricNodeRoomHolds,
			"Resizes sent to pods bound to a node whose room on the node is held until the pod cache shows them, so that the resizes sent only when they fit (resize-when: fits-node) count them.", nil, nil),
		boosted: prometheus.NewDesc(MetricStartupBoosts,
			"Pods of InPlace VPAs running with a CPU startup boost that has not ended yet: at creation (vpaCpuStartupBoost annotations), or again after a container's restart.", nil, nil),
	}
}

// snapshot reads the controllers' state once New has bound one; nil
// before.
func (g *gaugeCollector) snapshot() *GaugeSnapshot {
	g.mu.Lock()
	sources := make([]func() GaugeSnapshot, 0, len(g.sources))
	for _, f := range g.sources {
		sources = append(sources, f)
	}
	g.mu.Unlock()
	if len(sources) == 0 {
		return nil
	}
	var sum GaugeSnapshot
	for _, f := range sources {
		sum.add(f())
	}
	return &sum
}

// add adds o to s.
func (s *GaugeSnapshot) add(o GaugeSnapshot) {
	s.Records += o.Records
	s.MemoryRecords += o.MemoryRecords
	s.Pending = addCounts(s.Pending, o.Pending)
	for st, d := range o.Oldest {
		if s.Oldest == nil {
			s.Oldest = map[state.PodState]time.Duration{}
		}
		s.Oldest[st] = max(s.Oldest[st], d)
	}
	s.Paused = s.Paused || o.Paused
	s.DryRun = s.DryRun || o.DryRun
	s.MetricsAPI = s.MetricsAPI || o.MetricsAPI
	s.Jobs = addCounts(s.Jobs, o.Jobs)
	s.Boosted += o.Boosted
	s.RestartReservations = addCounts(s.RestartReservations, o.RestartReservations)
	s.NodeRoomHolds += o.NodeRoomHolds
	s.Watched += o.Watched
	s.HarmHolds += o.HarmHolds
	s.CanaryWaiting += o.CanaryWaiting
}

func addCounts[K comparable](sum, o map[K]int) map[K]int {
	for k, n := range o {
		if sum == nil {
			sum = map[K]int{}
		}
		sum[k] += n
	}
	return sum
}

// Describe implements prometheus.Collector.
func (g *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.records, g.memoryRecords, g.pending, g.oldest, g.paused, g.dryRun, g.metricsAPI, g.jobs, g.boosted, g.restarts, g.roomHolds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	var s GaugeSnapshot
	if p := g.snapshot(); p != nil {
		s = *p
	}
	ch <- prometheus.MustNewConstMetric(g.records, prometheus.GaugeValue, float64(s.Records))
	ch <- prometheus.MustNewConstMetric(g.memoryRecords, prometheus.GaugeValue, float64(s.MemoryRecords))
	ch <- prometheus.MustNewConstMetric(g.metricsAPI, prometheus.GaugeValue, boolFloat(s.MetricsAPI))
	for _, state := range state.PendingPodStates {
		ch <- prometheus.MustNewConstMetric(g.pending, prometheus.GaugeValue, float64(s.Pending[state]), string(state))
		ch <- prometheus.MustNewConstMetric(g.oldest, prometheus.GaugeValue, s.Oldest[state].Seconds(), string(state))
	}
	ch <- prometheus.MustNewConstMetric(g.paused, prometheus.GaugeValue, boolFloat(s.Paused))
	ch <- prometheus.MustNewConstMetric(g.dryRun, prometheus.GaugeValue, boolFloat(s.DryRun))
	for _, state := range state.JobStates {
		ch <- prometheus.MustNewConstMetric(g.jobs, prometheus.GaugeValue, float64(s.Jobs[state]), string(state))
	}
	ch <- prometheus.MustNewConstMetric(g.boosted, prometheus.GaugeValue, float64(s.Boosted))
	for _, state := range disruption.HeldStates {
		ch <- prometheus.MustNewConstMetric(g.restarts, prometheus.GaugeValue, float64(s.RestartReservations[state]), state)
	}
	ch <- prometheus.MustNewConstMetric(g.roomHolds, prometheus.GaugeValue, float64(s.NodeRoomHolds))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
