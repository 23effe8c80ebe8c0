// Package admission is the webhook of the vpa-inplace admission controller.
// It serves three endpoints, each taking an admission.k8s.io/v1
// AdmissionReview and answering one with the request's UID:
//
//   - ValidateVPAsPath validates VPAs being created or updated (ValidateVPA):
//     updateMode InPlace needs the InPlace feature gate, except on VPAs that
//     already were InPlace, and the rest of the spec must be well formed.
//   - ValidateVPAQuantitiesPath refuses VPAs of any mode whose resource
//     quantities exceed pkg/quantity's bound, checked on the JSON as
//     written: one such quantity takes minutes to parse, and would stall
//     every VPA controller that decodes the object. ValidateVPAsPath applies
//     the same bound before it decodes anything. A quantity over the bound
//     that the stored object already holds at the same place is accepted
//     with a warning, so that objects stored before the bound stay editable.
//   - MutatePodsPath gives a new pod whose VPA is in updateMode InPlace the
//     VPA's current recommendation, processed exactly as the updater does
//     (package recommendation), as a JSON Patch. This happens whether the
//     feature gate is on or off (AEP-8818: admission-time updates keep
//     working). Values the VPA's hold after harm holds (the updater's
//     safety records, read through Config.Holds) are given what they were
//     before the harm instead, and HoldAnnotation says so. Pods of VPAs in
//     other modes are left alone. Any failure while
//     working out the patch admits the pod unchanged: pod creation never
//     depends on this webhook.
//
// A request that is not a well-formed AdmissionReview for the endpoint
// (undecodable, wrong kind or version, no request, an object of the wrong
// type, a body over the size limit) gets HTTP 400 with the reason; a wrong
// method 405; a wrong content type 415.
package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
)

// Paths of the two webhooks.
const (
	ValidateVPAsPath          = "/validate-vpas"
	ValidateVPAQuantitiesPath = "/validate-vpa-quantities"
	MutatePodsPath            = "/mutate-pods"
)

// DefaultMaxRequestBytes is the largest AdmissionReview accepted: 6 MiB. An
// object is at most 1.5 MiB in etcd and can grow when rendered as JSON; a
// review of an update carries two of them. Anything larger is not a review
// the API server sends, and is refused before it is decoded.
const DefaultMaxRequestBytes int64 = 6 << 20

const contentTypeJSON = "application/json"

var (
	podsResource = metav1.GroupVersionResource{Group: "", Version: "v1", Resource: "pods"}
	vpasResource = metav1.GroupVersionResource{Group: vpatypes.SchemeGroupVersion.Group, Version: "v1", Resource: "verticalpodautoscalers"}
	vpaKind      = schema.GroupKind{Group: vpatypes.SchemeGroupVersion.Group, Kind: "VerticalPodAutoscaler"}
	reviewGV     = admissionv1.SchemeGroupVersion.String()
)

// VPAResolver finds the VPA that controls a pod (nil when none does).
type VPAResolver interface {
	VPAForPod(ctx context.Context, pod *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error)
}

// Recommender computes what each container of a pod should have.
type Recommender interface {
	ForPod(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (recommendation.Desired, error)
}

var (
	_ VPAResolver  = (*target.Resolver)(nil)
	_ Recommender  = (*recommendation.Calculator)(nil)
	_ Recommender  = (*recommendation.Memo)(nil)
	_ http.Handler = (*Handler)(nil)
)

// Config configures a Handler.
type Config struct {
	// FeatureGate holds the InPlace and CPUStartupBoost gates (required).
	FeatureGate featuregate.FeatureGate
	// VPAs finds a pod's VPA (required).
	VPAs VPAResolver
	// Recommendations computes a pod's resources (required).
	Recommendations Recommender
	// Limits tells what the namespace's LimitRanges and ResourceQuotas
	// allow a new pod: CPU startup boosts are kept within them. nil bounds
	// boosts by nothing.
	Limits *Limits
	// Metrics are updated per request (required).
	Metrics *Metrics
	// Holds tells a VPA's hold after harm, kept by the updater in its
	// safety records: a new pod is not given values it holds (held.go).
	// nil holds nothing.
	Holds HoldReader
	// Now is the time holds are compared with; nil means time.Now.
	Now func() time.Time
	// Recorder records events on VPAs (the startup boosts of their new
	// pods); nil records none. It must not block: client-go's recorders
	// queue events and drop them when the queue is full.
	Recorder record.EventRecorder
	// Namespace, when set, limits the handler to objects of that namespace;
	// objects elsewhere are admitted as they are.
	Namespace string
	// IgnoredNamespaces are namespaces whose objects are admitted as they
	// are.
	IgnoredNamespaces []string
	// MaxRequestBytes is the largest request body read; 0 means
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// Timeout bounds the handling of one request, through its context; 0
	// means no bound beyond the server's.
	Timeout time.Duration
	// MaxInflightPods bounds the pod reviews (MutatePodsPath) handled at
	// once; past it a request is answered 429 before its body is read. 0
	// means DefaultMaxInflightPods.
	MaxInflightPods int
	// MaxInflightVPAs bounds, apart, the reviews of each VPA endpoint
	// (ValidateVPAsPath, ValidateVPAQuantitiesPath) handled at once: pods,
	// whose webhook fails open, never take the slots of VPAs, whose
	// webhooks fail closed. 0 means DefaultMaxInflightVPAs.
	MaxInflightVPAs int
	// MaxInflightPerNamespace bounds the requests of one namespace that
	// each endpoint handles at once (at most the endpoint's bound). Past
	// it, a pod is admitted unchanged and a VPA review answered 429: no
	// namespace holds more than this share of an endpoint. 0 means
	// DefaultMaxInflightPerNamespace.
	MaxInflightPerNamespace int
}

// Defaults of the in-flight bounds. A review is handled in about a tenth
// of a millisecond, so this many at once is far beyond what the API server
// sends; the bound is for memory: 32 bodies of at most 6 MiB.
const (
	DefaultMaxInflightPods         = 16
	DefaultMaxInflightVPAs         = 8
	DefaultMaxInflightPerNamespace = 4
)

// vpaNamespaces is implemented by a VPAResolver that can tell whether a
// namespace holds any VPA, so that pods of namespaces without one are
// admitted before they are decoded.
type vpaNamespaces interface {
	HasVPAs(namespace string) bool
}

var _ vpaNamespaces = (*target.Resolver)(nil)

// Handler serves ValidateVPAsPath, ValidateVPAQuantitiesPath and
// MutatePodsPath.
type Handler struct {
	cfg        Config
	ignored    map[string]bool
	mux        *http.ServeMux
	pools      map[string]*inflight // by endpoint
	namespaces vpaNamespaces        // nil when the resolver cannot tell
}

// NewHandler returns a Handler for cfg.
func NewHandler(cfg Config) (*Handler, error) {
	var errs []error
	if cfg.FeatureGate == nil {
		errs = append(errs, errors.New("a feature gate is required"))
	}
	if cfg.VPAs == nil {
		errs = append(errs, errors.New("a VPA resolver is required"))
	}
	if cfg.Recommendations == nil {
		errs = append(errs, errors.New("a recommender is required"))
	}
	if cfg.Metrics == nil {
		errs = append(errs, errors.New("metrics are required"))
	}
	if cfg.MaxRequestBytes < 0 || cfg.Timeout < 0 || cfg.MaxInflightPods < 0 || cfg.MaxInflightVPAs < 0 || cfg.MaxInflightPerNamespace < 0 {
		errs = append(errs, errors.New("the request size limit, timeout and in-flight bounds must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("admission handler: %w", err)
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Holds == nil {
		cfg.Holds = (*Holds)(nil) // holds nothing
	}
	cfg.MaxInflightPods = cmp.Or(cfg.MaxInflightPods, DefaultMaxInflightPods)
	cfg.MaxInflightVPAs = cmp.Or(cfg.MaxInflightVPAs, DefaultMaxInflightVPAs)
	cfg.MaxInflightPerNamespace = cmp.Or(cfg.MaxInflightPerNamespace, DefaultMaxInflightPerNamespace)
	h := &Handler{cfg: cfg, ignored: map[string]bool{}, mux: http.NewServeMux()}
	h.namespaces, _ = cfg.VPAs.(vpaNamespaces)
	for _, ns := range cfg.IgnoredNamespaces {
		h.ignored[ns] = true
	}
	// Each endpoint has a pool of its own: a burst or a slow tenant on one
	// never takes the slots of another.
	h.pools = map[string]*inflight{
		EndpointValidateVPAs:          newInflight(cfg.MaxInflightVPAs, cfg.MaxInflightPerNamespace),
		EndpointValidateVPAQuantities: newInflight(cfg.MaxInflightVPAs, cfg.MaxInflightPerNamespace),
		EndpointMutatePods:            newInflight(cfg.MaxInflightPods, cfg.MaxInflightPerNamespace),
	}
	h.mux.Handle(ValidateVPAsPath, h.endpoint(EndpointValidateVPAs, h.reviewVPA, false))
	h.mux.Handle(ValidateVPAQuantitiesPath, h.endpoint(EndpointValidateVPAQuantities, h.reviewVPAQuantities, false))
	h.mux.Handle(MutatePodsPath, h.endpoint(EndpointMutatePods, h.reviewPod, true))
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// httpError is a request that is answered with an HTTP error instead of an
// AdmissionReview.
type httpError struct {
	code int
	err  error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &httpError{code: http.StatusBadRequest, err: fmt.Errorf(format, args...)}
}

// reviewFunc answers one admission request. An error is an *httpError.
type reviewFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error)

// endpoint serves one path with review, within the endpoint's pool. A
// request past its namespace's share of the pool is admitted unchanged
// when admitWhenBusy (pods: their creation never depends on this webhook),
// else answered 429.
func (h *Handler) endpoint(name string, review reviewFunc, admitWhenBusy bool) http.Handler {
	pool := h.pools[name]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !pool.enter(r.Context()) {
			// Refused before the body is read: the bound is on memory.
			h.cfg.Metrics.requests.WithLabelValues(name, OutcomeThrottled).Inc()
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("more than %d admission requests at once on %s", pool.size, name), http.StatusTooManyRequests)
			return
		}
		defer pool.leave()
		start := time.Now()
		defer func() { h.cfg.Metrics.duration.WithLabelValues(name).Observe(time.Since(start).Seconds()) }()
		ctx := r.Context()
		if h.cfg.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, h.cfg.Timeout)
			defer cancel()
		}
		logger := klog.FromContext(ctx).WithValues("endpoint", name)
		ctx = klog.NewContext(ctx, logger)

		resp, body, busy, err := h.handle(ctx, w, r, review, pool, admitWhenBusy)
		if err != nil {
			he, ok := errors.AsType[*httpError](err)
			if !ok {
				he = &httpError{code: http.StatusInternalServerError, err: err}
			}
			switch {
			case busy:
				h.cfg.Metrics.requests.WithLabelValues(name, OutcomeNamespaceThrottled).Inc()
				logger.V(2).Info("Refused admission request", "status", he.code, "err", he.err)
				w.Header().Set("Retry-After", "1")
			case he.code >= http.StatusInternalServerError:
				h.cfg.Metrics.requests.WithLabelValues(name, OutcomeError).Inc()
				logger.Error(he.err, "Cannot answer an admission request", "status", he.code)
			default:
				h.cfg.Metrics.requests.WithLabelValues(name, OutcomeBadRequest).Inc()
				logger.Info("Refused admission request", "status", he.code, "err", he.err)
			}
			if he.code == http.StatusMethodNotAllowed {
				w.Header().Set("Allow", http.MethodPost)
			}
			http.Error(w, he.err.Error(), he.code)
			return
		}
		defer putBody(body)
		if busy {
			h.cfg.Metrics.requests.WithLabelValues(name, OutcomeNamespaceThrottled).Inc()
		} else {
			h.cfg.Metrics.requests.WithLabelValues(name, outcome(resp)).Inc()
		}
		w.Header().Set("Content-Type", contentTypeJSON)
		if _, err := w.Write(*body); err != nil {
			logger.V(2).Info("Cannot write the admission response", "err", err)
		}
	})
}

func outcome(resp *admissionv1.AdmissionResponse) string {
	switch {
	case !resp.Allowed:
		return OutcomeRejected
	case len(resp.Patch) > 0:
		return OutcomePatched
	default:
		return OutcomeAllowed
	}
}

// handle reads, decodes and answers one request. The answer is written in
// body, a buffer of bodyBuffers. busy is true when the request's namespace
// had its share of pool in use: the request was not reviewed, and is
// admitted unchanged (admitWhenBusy) or answered 429.
func (h *Handler) handle(ctx context.Context, w http.ResponseWriter, r *http.Request, review reviewFunc, pool *inflight, admitWhenBusy bool) (
	resp *admissionv1.AdmissionResponse, body *[]byte, busy bool, err error) {
	if r.Method != http.MethodPost {
		return nil, nil, false, &httpError{code: http.StatusMethodNotAllowed, err: fmt.Errorf("method %s is not allowed: use POST", r.Method)}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != contentTypeJSON {
		return nil, nil, false, &httpError{code: http.StatusUnsupportedMediaType,
			err: fmt.Errorf("content type %q is not supported: use %s", r.Header.Get("Content-Type"), contentTypeJSON)}
	}
	if r.ContentLength > h.cfg.MaxRequestBytes {
		return nil, nil, false, badRequest("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, h.cfg.MaxRequestBytes)
	}
	in, err := readBody(w, r, h.cfg.MaxRequestBytes)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, nil, false, badRequest("request body exceeds the limit of %d bytes", h.cfg.MaxRequestBytes)
		}
		return nil, nil, false, badRequest("reading the request body: %v", err)
	}
	req, err := decodeReview(in)
	if err != nil {
		return nil, nil, false, err
	}
	release, ok := pool.enterNamespace(req.Namespace)
	if !ok {
		busy = true
		if !admitWhenBusy {
			return nil, nil, true, &httpError{code: http.StatusTooManyRequests,
				err: fmt.Errorf("more than %d admission requests of namespace %q at once", pool.perNamespace, req.Namespace)}
		}
		klog.FromContext(ctx).V(2).Info("Admitting a new pod unchanged: its namespace has its share of requests in flight",
			"pod", klog.KRef(req.Namespace, req.Name), "share", pool.perNamespace)
		resp = &admissionv1.AdmissionResponse{Allowed: true}
	} else {
		defer release()
	}
	// Guarded: the arguments of a disabled log call are still built.
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		logger.Info("Admission request", "uid", req.UID, "operation", req.Operation,
			"resource", req.Resource.Resource, "subResource", req.SubResource, "object", klog.KRef(req.Namespace, req.Name))
	}

	if !busy {
		if resp, err = review(ctx, req); err != nil {
			return nil, nil, false, err
		}
	}
	resp.UID = req.UID
	body = getBody()
	if *body, err = appendReview(*body, resp); err != nil {
		putBody(body)
		return nil, nil, busy, err
	}
	return resp, body, busy, nil
}

// readBody reads the request body into one buffer of its declared length
// (already checked against limit), or, without one, up to limit.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, err
	}
	return body, nil
}

// watches tells whether objects of namespace ns are handled.
func (h *Handler) watches(ns string) bool {
	if h.cfg.Namespace != "" && ns != h.cfg.Namespace {
		return false
	}
	return !h.ignored[ns]
}

func gvrString(r metav1.GroupVersionResource) string {
	if r.Group == "" {
		return r.Version + "/" + r.Resource
	}
	return r.Group + "/" + r.Version + "/" + r.Resource
}
