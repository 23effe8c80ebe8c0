package admission

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names.
const (
	MetricRequests          = "vpa_inplace_admission_requests_total"
	MetricRequestDuration   = "vpa_inplace_admission_request_duration_seconds"
	MetricPodMutations      = "vpa_inplace_admission_pod_mutations_total"
	MetricPodMutationErrors = "vpa_inplace_admission_pod_mutation_failures_total"
	MetricVPARejections     = "vpa_inplace_admission_vpa_rejections_total"
	MetricStartupBoosts     = "vpa_inplace_admission_startup_boosts_total"
)

// Webhook label values: the endpoint that answered. The label is named
// webhook, not endpoint: a Prometheus Operator scrape sets its own endpoint
// label on every series and would rename ours exported_endpoint.
const (
	EndpointValidateVPAs          = "validate-vpas"
	EndpointValidateVPAQuantities = "validate-vpa-quantities"
	EndpointMutatePods            = "mutate-pods"
)

// Outcome label values of MetricRequests.
const (
	// OutcomeAllowed: allowed without a patch.
	OutcomeAllowed = "allowed"
	// OutcomePatched: allowed with a patch.
	OutcomePatched = "patched"
	// OutcomeRejected: denied (a VPA that fails validation).
	OutcomeRejected = "rejected"
	// OutcomeBadRequest: answered with an HTTP 4xx error (malformed review,
	// wrong method or content type, body too large).
	OutcomeBadRequest = "bad_request"
	// OutcomeError: answered with an HTTP 5xx error (the response could not
	// be encoded).
	OutcomeError = "error"
	// OutcomeThrottled: answered 429, past the endpoint's bound on
	// requests handled at once.
	OutcomeThrottled = "throttled"
	// OutcomeNamespaceThrottled: not reviewed, past the namespace's share
	// of the endpoint's bound: a pod admitted unchanged, a VPA answered
	// 429.
	OutcomeNamespaceThrottled = "namespace_throttled"
)

// Failure label values of MetricPodMutationErrors: the step of the pod
// mutation that failed. The pod was allowed unchanged.
const (
	FailureResolveVPA     = "resolve_vpa"
	FailureRecommendation = "recommendation"
	FailurePatch          = "patch"
	// FailureStartupBoost: working out the CPU startup boosts.
	FailureStartupBoost = "startup_boost"
	FailurePanic        = "panic"
	// FailureTooLarge: the pod's labels or owner references are larger
	// than any the API server accepts; they were not decoded.
	FailureTooLarge = "too_large"
)

// Outcome label values of MetricStartupBoosts, per container of a new pod
// with a CPU startup boost policy.
const (
	// StartupBoostApplied: the container was boosted as its policy asks.
	StartupBoostApplied = "applied"
	// StartupBoostCapped: it was boosted less than its policy asks, to stay
	// within the namespace's LimitRanges and ResourceQuotas (event
	// InPlaceStartupBoostCapped on the VPA).
	StartupBoostCapped = "capped"
	// StartupBoostSkipped: it was not (event InPlaceStartupBoostSkipped
	// says why).
	StartupBoostSkipped = "skipped"
)

// Reason label values of MetricVPARejections.
const (
	// RejectionFeatureGate: updateMode InPlace while the gate is off.
	RejectionFeatureGate = "feature_gate"
	// RejectionInvalid: any other validation error.
	RejectionInvalid = "invalid"
	// RejectionQuantity: a resource quantity beyond pkg/quantity's bound.
	RejectionQuantity = "quantity"
)

// Metrics are the admission controller's metrics. None is labelled per pod
// or per VPA.
type Metrics struct {
	requests         *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	mutations        prometheus.Counter
	mutationFailures *prometheus.CounterVec
	rejections       *prometheus.CounterVec
	startupBoosts    *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; a nil reg
// leaves them unregistered (tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Admission requests handled, by webhook (endpoint) and outcome (allowed, patched, rejected, bad_request, error, throttled, namespace_throttled).",
		}, []string{"webhook", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRequestDuration,
			Help:    "Time to handle an admission request, by webhook (endpoint).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"webhook"}),
		mutations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPodMutations,
			Help: "New pods of InPlace VPAs whose resources were set from the recommendation.",
		}),
		mutationFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPodMutationErrors,
			Help: "Pod mutations that failed, by failed step; each such pod was admitted unchanged.",
		}, []string{"step"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricVPARejections,
			Help: "VPA creations and updates rejected, by reason (feature_gate, invalid, quantity).",
		}, []string{"reason"}),
		startupBoosts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricStartupBoosts,
			Help: "Containers of new pods with a CPU startup boost policy, by outcome (applied, capped, skipped).",
		}, []string{"outcome"}),
	}
	// Known label values start at zero so that rates exist from the start.
	for _, e := range []string{EndpointValidateVPAs, EndpointValidateVPAQuantities, EndpointMutatePods} {
		m.duration.WithLabelValues(e)
		for _, o := range []string{OutcomeAllowed, OutcomePatched, OutcomeRejected, OutcomeBadRequest, OutcomeError, OutcomeThrottled, OutcomeNamespaceThrottled} {
			m.requests.WithLabelValues(e, o)
		}
	}
	for _, s := range []string{FailureResolveVPA, FailureRecommendation, FailureStartupBoost, FailurePatch, FailurePanic, FailureTooLarge} {
		m.mutationFailures.WithLabelValues(s)
	}
	for _, r := range []string{RejectionFeatureGate, RejectionInvalid, RejectionQuantity} {
		m.rejections.WithLabelValues(r)
	}
	for _, o := range []string{StartupBoostApplied, StartupBoostCapped, StartupBoostSkipped} {
		m.startupBoosts.WithLabelValues(o)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.mutations, m.mutationFailures, m.rejections, m.startupBoosts} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("registering admission metrics: %w", err)
	}
	return m, nil
}
