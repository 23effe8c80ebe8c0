// Package report holds what the updater tells the outside: its event
// reasons (events.go) and its Prometheus metrics. Names here are an
// interface: the chart's alerts and dashboard use them.
package report

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/disruption"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
	"github.com/vpa-inplace/vpa-inplace/pkg/usage"
)

// Metric names. docs/observability.md describes each.
const (
	MetricDecisions         = "vpa_inplace_updater_decisions_total"
	MetricDecisionDuration  = "vpa_inplace_updater_decision_duration_seconds"
	MetricResizesSent       = "vpa_inplace_updater_resizes_sent_total"
	MetricResizesCompleted  = "vpa_inplace_updater_resizes_completed_total"
	MetricResizeFailures    = "vpa_inplace_updater_resize_failures_total"
	MetricResizesWithheld   = "vpa_inplace_updater_resizes_withheld_total"
	MetricRecommendationLag = "vpa_inplace_updater_recommendation_to_patch_seconds"
	MetricPodsPending       = "vpa_inplace_updater_pods_pending"
	MetricOldestPending     = "vpa_inplace_updater_oldest_pending_seconds"
	MetricInfeasibleRecords = "vpa_inplace_updater_infeasible_records"
	MetricAPIErrors         = "vpa_inplace_updater_api_errors_total"
	MetricPaused            = "vpa_inplace_updater_paused"
	MetricDryRun            = "vpa_inplace_updater_dry_run"
	MetricJobDecisions      = "vpa_inplace_updater_job_template_decisions_total"
	MetricJobWrites         = "vpa_inplace_updater_job_template_writes_total"
	MetricSuspendedJobs     = "vpa_inplace_updater_suspended_jobs"
	MetricMemoryLimitsHeld  = "vpa_inplace_updater_memory_limit_decreases_held_total"
	MetricMemoryRecords     = "vpa_inplace_updater_memory_limit_records"
	MetricMetricsAPI        = "vpa_inplace_updater_metrics_api_available"
	MetricMetricsAPIRequest = "vpa_inplace_updater_metrics_api_requests_total"
	MetricStaleCacheReads   = "vpa_inplace_updater_stale_cache_reads_total"
	MetricPanics            = "vpa_inplace_updater_worker_panics_total"
	MetricStartupBoosts     = "vpa_inplace_updater_startup_boosts_active"
	MetricBoostDuration     = "vpa_inplace_updater_startup_boost_duration_seconds"
	MetricRestartBoosts     = "vpa_inplace_updater_startup_boost_restarts_total"
	// MetricRestartReservations and MetricRestartReservationsEnded: places
	// held by resizes that restart containers (pkg/updater/disruption).
	MetricRestartReservations      = "vpa_inplace_updater_restart_reservations"
	MetricRestartReservationsEnded = "vpa_inplace_updater_restart_reservations_ended_total"
	MetricNodeRoomHolds            = "vpa_inplace_updater_node_room_holds"
	// MetricResizePreemptions: victims of the scheduler's preemption for
	// Deferred resizes (pkg/updater/preemption).
	MetricResizePreemptions = "vpa_inplace_updater_resize_preemptions_total"
)

// failureKubeletInfeasible is the failure reason of a resize the API server
// accepted and the kubelet then marked Infeasible; failureKubeletMemory of
// one the kubelet would not apply because it lowered a memory limit to the
// memory in use.
const (
	failureKubeletInfeasible = "KubeletInfeasible"
	failureKubeletMemory     = "KubeletMemoryLimitRefused"
)

// Sources of vpa_inplace_updater_memory_limit_decreases_held_total.
const (
	heldByMemoryUsage    = "MemoryUsage"
	heldByKubeletRefusal = "KubeletRefusal"
)

// Metrics are the updater's Prometheus metrics. None is labelled per pod,
// per Job or per VPA.
type Metrics struct {
	decisions        *prometheus.CounterVec
	decisionDuration prometheus.Histogram
	sent             prometheus.Counter
	completed        prometheus.Counter
	failures         *prometheus.CounterVec
	withheld         *prometheus.CounterVec
	recommendation   prometheus.Histogram
	apiErrors        *prometheus.CounterVec
	jobDecisions     *prometheus.CounterVec
	jobWrites        *prometheus.CounterVec
	memoryHeld       *prometheus.CounterVec
	metricsAPI       *prometheus.CounterVec
	staleCacheReads  prometheus.Counter
	panics           *prometheus.CounterVec
	boostDuration    prometheus.Histogram
	restartBoosts    *prometheus.CounterVec
	restartsEnded    *prometheus.CounterVec
	preemptions      prometheus.Counter
	jvmFloored       *prometheus.CounterVec
	gauges           *gaugeCollector
	safety           *safetyMetrics
}

// GaugeSnapshot is what the gauges show, read at each scrape.
type GaugeSnapshot struct {
	Records       int
	MemoryRecords int
	Pending       map[state.PodState]int
	Oldest        map[state.PodState]time.Duration
	Paused        bool
	DryRun        bool
	MetricsAPI    bool
	Jobs          map[state.JobState]int
	// Boosted counts the pods running with a CPU startup boost.
	Boosted int
	// RestartReservations counts the places held by resizes that restart
	// containers, by state (disruption.HeldStates).
	RestartReservations map[string]int
	// NodeRoomHolds counts the resizes sent whose room on their node is held
	// until the pod cache shows them.
	NodeRoomHolds int
	// Watched counts the pods watched after their resize; HarmHolds the
	// VPAs with a hold after harm; CanaryWaiting the pods whose decrease
	// waits for their VPA's canaries.
	Watched, HarmHolds, CanaryWaiting int
}

// NewMetrics creates the metrics and registers them on reg. The gauges read
// the controller's state once New has bound it.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDecisions, Help: "Decisions taken for pods, by action and reason.",
		}, []string{"action", "reason"}),
		decisionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricDecisionDuration,
			Help:    "Time from picking a pod off the queue to the decision (cache reads, recommendation processing, decision).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100us to ~26s
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricResizesSent, Help: "Resize patches accepted by the API server.",
		}),
		completed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricResizesCompleted, Help: "Resizes sent by the updater that the kubelet applied.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricResizeFailures,
			Help: "Resizes refused or failed, by reason: NodeCapacity, Invalid, Conflict, Transient (patch refused or failed), KubeletInfeasible (accepted, then marked Infeasible by the kubelet), KubeletMemoryLimitRefused (accepted, then not applied by the kubelet because it lowered a memory limit to the memory in use).",
		}, []string{"reason"}),
		withheld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricResizesWithheld, Help: "Resizes decided but not sent, by reason: DryRun, VPAPaused, ClusterPaused, Frozen.",
		}, []string{"reason"}),
		recommendation: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricRecommendationLag,
			Help:    "Time from the updater observing a VPA's new recommendation (or first seeing the VPA) to an accepted resize patch of one of its pods.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10), // 10ms to ~43m
		}),
		apiErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAPIErrors, Help: "Failed requests to the Kubernetes API server, by HTTP status code (\"error\" when no response came) and method.",
		}, []string{"code", "method"}),
		jobDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricJobDecisions, Help: "Decisions taken for the pod templates of suspended Jobs, by action and reason.",
		}, []string{"action", "reason"}),
		jobWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricJobWrites,
			Help: "Writes of recommendations into suspended Jobs' pod templates, by outcome: Accepted, Rejected (refused for good, recorded), Conflict, Gone, Transient (retried), Withheld (dry run or paused, not sent).",
		}, []string{"outcome"}),
		memoryHeld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricMemoryLimitsHeld,
			Help: "Memory-limit decreases held back (memory records made), by source: MemoryUsage (usage from the metrics API plus the margin reaches the new limit), KubeletRefusal (the kubelet refused the decrease).",
		}, []string{"source"}),
		metricsAPI: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricMetricsAPIRequest,
			Help: "Requests for pod metrics to the metrics API (metrics.k8s.io), by result: Found, NotFound, Unavailable, Error.",
		}, []string{"result"}),
		staleCacheReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricStaleCacheReads,
			Help: "Pods read from the API server because the pod watch had not delivered a resize the updater sent, for a minute or more.",
		}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPanics,
			Help: "Panics recovered while handling one item, by queue: pod, vpa, condition, job. The item is retried with backoff; the other items go on.",
		}, []string{"queue"}),
		boostDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricBoostDuration,
			Help:    "How long pods ran with a CPU startup boost: from the pod's creation to the resize that ended it (the time to Ready plus the boost's durationSeconds, plus the updater's own delay).",
			Buckets: prometheus.ExponentialBuckets(5, 2, 10), // 5s to ~43m
		}),
		restartsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRestartReservationsEnded,
			Help: "Places under --eviction-tolerance and PodDisruptionBudgets given back by resizes that restart containers, by reason: Back (Ready again for minReady), Infeasible (the kubelet will not apply it), Expired (not applied within --restart-reservation-timeout while the pod stayed Ready), Refused (the patch was refused or failed before it could be applied), Recorded, Withheld, Gone.",
		}, []string{"reason"}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricResizePreemptions,
			Help: "Pods the scheduler preempted on the node of a Deferred resize of an InPlace VPA's pod of higher priority (resize preemption, KEP-5836, alpha in Kubernetes 1.37), as the victims' DisruptionTarget condition shows them; each victim once. The scheduler's disruptions, not the updater's.",
		}),
		restartBoosts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRestartBoosts,
			Help: "Containers that restarted after their CPU startup boost, by outcome: Boosted (boosted again in place), Ended (that boost taken back), BackedOff (restarted more than --startup-boost-max-restarts times: not boosted any more; once per pod and set of containers).",
		}, []string{"outcome"}),
		jvmFloored: newJVMFloored(),
		gauges:     newGaugeCollector(),
	}
	for _, reason := range disruption.EndReasons {
		m.restartsEnded.WithLabelValues(string(reason))
	}
	m.safety = newSafetyMetrics(m.gauges.snapshot)
	for _, outcome := range []string{RestartBoostBoosted, RestartBoostEnded, RestartBoostBackedOff} {
		m.restartBoosts.WithLabelValues(outcome)
	}
	for _, c := range append([]prometheus.Collector{m.decisions, m.decisionDuration, m.sent, m.completed, m.failures, m.withheld, m.recommendation, m.apiErrors,
		m.jobDecisions, m.jobWrites, m.memoryHeld, m.metricsAPI, m.staleCacheReads, m.panics, m.boostDuration, m.restartsEnded, m.preemptions, m.restartBoosts, m.jvmFloored, m.gauges}, m.safety.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) Decided(d resize.Decision, took time.Duration) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(string(d.Action), string(d.Reason)).Inc()
	m.decisionDuration.Observe(took.Seconds())
}

func (m *Metrics) Patched(o resize.Outcome) {
	if m == nil {
		return
	}
	if o == resize.OutcomeAccepted {
		m.sent.Inc()
		return
	}
	m.failures.WithLabelValues(string(o)).Inc()
}

func (m *Metrics) Settled(outcome string) {
	if m == nil {
		return
	}
	switch outcome {
	case state.OutcomeCompleted:
		m.completed.Inc()
	case state.OutcomeKubeletInfeasible:
		m.failures.WithLabelValues(failureKubeletInfeasible).Inc()
	case state.OutcomeKubeletMemoryLimitRefused:
		m.failures.WithLabelValues(failureKubeletMemory).Inc()
	}
}

// ResizePreemption counts a victim of the scheduler's preemption for a
// Deferred resize.
func (m *Metrics) ResizePreemption() {
	if m == nil {
		return
	}
	m.preemptions.Inc()
}

func (m *Metrics) StaleCacheRead() {
	if m == nil {
		return
	}
	m.staleCacheReads.Inc()
}

func (m *Metrics) Panicked(queue string) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(queue).Inc()
}

func (m *Metrics) MemoryLimitsHeld(kind records.Kind) {
	if m == nil {
		return
	}
	source := heldByMemoryUsage
	if kind == records.KindMemoryLimitRefused {
		source = heldByKubeletRefusal
	}
	m.memoryHeld.WithLabelValues(source).Inc()
}

// MetricsAPIRequest counts one request to the metrics API by its result
// (usage.Config.Observe).
func (m *Metrics) MetricsAPIRequest(result usage.Result) {
	if m == nil {
		return
	}
	m.metricsAPI.WithLabelValues(string(result)).Inc()
}

// JobDecided counts a Job decision (jobtemplate.Metrics).
func (m *Metrics) JobDecided(action resize.Action, reason resize.Reason) {
	if m == nil {
		return
	}
	m.jobDecisions.WithLabelValues(string(action), string(reason)).Inc()
}

// JobWritten counts a Job template write by outcome (jobtemplate.Metrics).
func (m *Metrics) JobWritten(outcome string) {
	if m == nil {
		return
	}
	m.jobWrites.WithLabelValues(outcome).Inc()
}

func (m *Metrics) WithheldResize(reason string) {
	if m == nil {
		return
	}
	m.withheld.WithLabelValues(reason).Inc()
}

func (m *Metrics) RecommendationApplied(lag time.Duration) {
	if m == nil {
		return
	}
	m.recommendation.Observe(lag.Seconds())
}

// Outcomes of vpa_inplace_updater_startup_boost_restarts_total.
const (
	// RestartBoostBoosted: a container boosted again after a restart.
	RestartBoostBoosted = "Boosted"
	// RestartBoostEnded: the boost after a restart ended (CPU taken back).
	RestartBoostEnded = "Ended"
	// RestartBoostBackedOff: a container found restarting more than the
	// bound: its restarts are not boosted (once per pod and containers).
	RestartBoostBackedOff = "BackedOff"
)

// RestartBoost counts what happened to the boost of a restarted container.
func (m *Metrics) RestartBoost(outcome string) {
	if m == nil {
		return
	}
	m.restartBoosts.WithLabelValues(outcome).Inc()
}

// BoostEnded observes the end of a pod's CPU startup boost; lasted is the
// time from the pod's creation to the resize that ended it.
func (m *Metrics) BoostEnded(lasted time.Duration) {
	if m == nil {
		return
	}
	m.boostDuration.Observe(lasted.Seconds())
}

// RestartReservationEnded counts a place given back by a resize that
// restarts containers (disruption.EndReason).
func (m *Metrics) RestartReservationEnded(reason string) {
	if m == nil {
		return
	}
	m.restartsEnded.WithLabelValues(reason).Inc()
}

// Bind makes the gauges read from snapshot, added to the snapshots of the
// other controllers bound (a replica working several spans of shards runs
// a controller for each): counts add up, the oldest of each state is the
// oldest of all, a flag is set when any sets it. The function returned
// unbinds it.
func (m *Metrics) Bind(snapshot func() GaugeSnapshot) (unbind func()) {
	if m == nil {
		return func() {}
	}
	g := m.gauges
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next++
	id := g.next
	if g.sources == nil {
		g.sources = map[uint64]func() GaugeSnapshot{}
	}
	g.sources[id] = snapshot
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.sources, id)
	}
}

// InstrumentTransport wraps a client transport so that failed API requests
// are counted: use it as rest.Config.WrapTransport for every client of the
// updater.
func (m *Metrics) InstrumentTransport(rt http.RoundTripper) http.RoundTripper {
	if m == nil {
		return rt
	}
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		switch {
		case err != nil:
			// A request cancelled by the updater itself (shutdown, lost
			// lease) is not an API error.
			if !errors.Is(err, context.Canceled) {
				m.apiErrors.WithLabelValues("error", req.Method).Inc()
			}
		case resp.StatusCode >= http.StatusBadRequest:
			m.apiErrors.WithLabelValues(strconv.Itoa(resp.StatusCode), req.Method).Inc()
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
