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
//     working). Pods of VPAs in other modes are left alone. Any failure while
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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	sigsjson "sigs.k8s.io/json"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaapiutil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
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
	// FeatureGate holds the InPlace gate (required).
	FeatureGate featuregate.FeatureGate
	// VPAs finds a pod's VPA (required).
	VPAs VPAResolver
	// Recommendations computes a pod's resources (required).
	Recommendations Recommender
	// Metrics are updated per request (required).
	Metrics *Metrics
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
	// MaxInflight bounds the requests handled at once, both endpoints
	// together; past it a request is answered 429 before its body is read.
	// 0 means DefaultMaxInflight.
	MaxInflight int
}

// DefaultMaxInflight is the default of Config.MaxInflight. A review is
// handled in about a tenth of a millisecond, so this many at once is far
// beyond what the API server sends; the bound is for memory: 16 bodies of
// at most 6 MiB.
const DefaultMaxInflight = 16

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
	inflight   chan struct{}
	namespaces vpaNamespaces // nil when the resolver cannot tell
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
	if cfg.MaxRequestBytes < 0 || cfg.Timeout < 0 || cfg.MaxInflight < 0 {
		errs = append(errs, errors.New("the request size limit, timeout and in-flight bound must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("admission handler: %w", err)
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxInflight == 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	h := &Handler{cfg: cfg, ignored: map[string]bool{}, mux: http.NewServeMux(), inflight: make(chan struct{}, cfg.MaxInflight)}
	h.namespaces, _ = cfg.VPAs.(vpaNamespaces)
	for _, ns := range cfg.IgnoredNamespaces {
		h.ignored[ns] = true
	}
	h.mux.Handle(ValidateVPAsPath, h.endpoint(EndpointValidateVPAs, h.reviewVPA))
	h.mux.Handle(ValidateVPAQuantitiesPath, h.endpoint(EndpointValidateVPAQuantities, h.reviewVPAQuantities))
	h.mux.Handle(MutatePodsPath, h.endpoint(EndpointMutatePods, h.reviewPod))
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

func (h *Handler) endpoint(name string, review reviewFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case h.inflight <- struct{}{}:
			defer func() { <-h.inflight }()
		default:
			// Refused before the body is read: the bound is on memory.
			h.cfg.Metrics.requests.WithLabelValues(name, OutcomeThrottled).Inc()
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("more than %d admission requests at once", h.cfg.MaxInflight), http.StatusTooManyRequests)
			return
		}
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

		out, err := h.handle(ctx, w, r, review)
		if err != nil {
			he, ok := errors.AsType[*httpError](err)
			if !ok {
				he = &httpError{code: http.StatusInternalServerError, err: err}
			}
			if he.code >= http.StatusInternalServerError {
				h.cfg.Metrics.requests.WithLabelValues(name, OutcomeError).Inc()
				logger.Error(he.err, "Cannot answer an admission request", "status", he.code)
			} else {
				h.cfg.Metrics.requests.WithLabelValues(name, OutcomeBadRequest).Inc()
				logger.Info("Refused admission request", "status", he.code, "err", he.err)
			}
			if he.code == http.StatusMethodNotAllowed {
				w.Header().Set("Allow", http.MethodPost)
			}
			http.Error(w, he.err.Error(), he.code)
			return
		}
		h.cfg.Metrics.requests.WithLabelValues(name, outcome(out.response)).Inc()
		w.Header().Set("Content-Type", contentTypeJSON)
		if _, err := w.Write(out.body); err != nil {
			logger.V(2).Info("Cannot write the admission response", "err", err)
		}
	})
}

// encodedReview is an answer ready to be written.
type encodedReview struct {
	response *admissionv1.AdmissionResponse
	body     []byte
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

// handle reads, decodes and answers one request.
func (h *Handler) handle(ctx context.Context, w http.ResponseWriter, r *http.Request, review reviewFunc) (*encodedReview, error) {
	if r.Method != http.MethodPost {
		return nil, &httpError{code: http.StatusMethodNotAllowed, err: fmt.Errorf("method %s is not allowed: use POST", r.Method)}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != contentTypeJSON {
		return nil, &httpError{code: http.StatusUnsupportedMediaType,
			err: fmt.Errorf("content type %q is not supported: use %s", r.Header.Get("Content-Type"), contentTypeJSON)}
	}
	if r.ContentLength > h.cfg.MaxRequestBytes {
		return nil, badRequest("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, h.cfg.MaxRequestBytes)
	}
	body, err := readBody(w, r, h.cfg.MaxRequestBytes)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, badRequest("request body exceeds the limit of %d bytes", h.cfg.MaxRequestBytes)
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	req, err := decodeReview(body)
	if err != nil {
		return nil, err
	}
	// Guarded: the arguments of a disabled log call are still built.
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		logger.Info("Admission request", "uid", req.UID, "operation", req.Operation,
			"resource", req.Resource.Resource, "subResource", req.SubResource, "object", klog.KRef(req.Namespace, req.Name))
	}

	resp, err := review(ctx, req)
	if err != nil {
		return nil, err
	}
	resp.UID = req.UID
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: reviewGV, Kind: "AdmissionReview"},
		Response: resp,
	}
	b, err := json.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("encoding the admission response: %w", err)
	}
	return &encodedReview{response: resp, body: b}, nil
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

// decodeReview decodes an admission.k8s.io/v1 AdmissionReview with a
// request, once. The request's objects refer to body, not to copies.
func decodeReview(body []byte) (*admissionv1.AdmissionRequest, error) {
	if len(body) == 0 {
		return nil, badRequest("empty request body: expected an AdmissionReview")
	}
	var review reviewEnvelope
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return nil, badRequest("decoding the AdmissionReview: %v", err)
	}
	if review.APIVersion != reviewGV || review.Kind != "AdmissionReview" {
		return nil, badRequest("expected kind AdmissionReview of apiVersion %s, got kind %q of apiVersion %q",
			reviewGV, review.Kind, review.APIVersion)
	}
	if review.Request == nil {
		return nil, badRequest("the AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, badRequest("the AdmissionReview's request has no uid")
	}
	req := &review.Request.AdmissionRequest
	req.Object.Raw, req.OldObject.Raw = review.Request.Object, review.Request.OldObject
	return req, nil
}

// watches tells whether objects of namespace ns are handled.
func (h *Handler) watches(ns string) bool {
	if h.cfg.Namespace != "" && ns != h.cfg.Namespace {
		return false
	}
	return !h.ignored[ns]
}

// reviewVPA validates a VPA being created or updated.
func (h *Handler) reviewVPA(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	if req.Resource != vpasResource {
		return nil, badRequest("%s handles %s, got a request for %s", ValidateVPAsPath, gvrString(vpasResource), gvrString(req.Resource))
	}
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return allowed, nil
	}
	// Quantities are bounded on the JSON as written, before anything is
	// decoded: a single one can take minutes to parse.
	raw, oldRaw, kept, resp, err := h.boundVPAQuantities(ctx, req)
	if resp != nil || err != nil {
		return resp, err
	}
	vpa, err := decodeVPA(raw)
	if err != nil {
		return nil, badRequest("object: %v", err)
	}
	var old *vpatypes.VerticalPodAutoscaler
	if req.Operation == admissionv1.Update {
		if old, err = decodeVPA(oldRaw); err != nil {
			return nil, badRequest("oldObject: %v", err)
		}
	}
	if !h.watches(req.Namespace) {
		return allowed, nil
	}

	warnings, errs := ValidateVPA(vpa, old, h.cfg.FeatureGate.Enabled(features.InPlace))
	warnings = append(kept, warnings...)
	allowed.Warnings = warnings
	if len(errs) == 0 {
		return allowed, nil
	}
	name := cmp.Or(vpa.Name, req.Name)
	status := apierrors.NewInvalid(vpaKind, name, errs).ErrStatus
	reason := RejectionInvalid
	for _, e := range errs {
		if IsFeatureGateError(e) {
			reason = RejectionFeatureGate
			break
		}
	}
	h.cfg.Metrics.rejections.WithLabelValues(reason).Inc()
	klog.FromContext(ctx).V(2).Info("Rejected VPA", "vpa", klog.KRef(req.Namespace, name), "operation", req.Operation,
		"reason", reason, "errors", errs.ToAggregate().Error())
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: warnings}, nil
}

// reviewVPAQuantities applies the quantity bound alone to a VPA being
// created or updated. It never decodes the VPA.
func (h *Handler) reviewVPAQuantities(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	if req.Resource != vpasResource {
		return nil, badRequest("%s handles %s, got a request for %s", ValidateVPAQuantitiesPath, gvrString(vpasResource), gvrString(req.Resource))
	}
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}, nil
	}
	_, _, kept, resp, err := h.boundVPAQuantities(ctx, req)
	if resp != nil || err != nil {
		return resp, err
	}
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: kept}, nil
}

// boundVPAQuantities checks the quantities of the request's objects against
// pkg/quantity's bound, in every namespace: such a VPA stalls any
// controller that decodes it, whoever serves its namespace. It returns the
// rejection of a VPA that exceeds the bound, or else the objects safe to
// decode (quantities kept only because they are unchanged are replaced by
// "0") and a warning for each kept one.
func (h *Handler) boundVPAQuantities(ctx context.Context, req *admissionv1.AdmissionRequest) (raw, oldRaw []byte, kept []string, resp *admissionv1.AdmissionResponse, err error) {
	if req.Operation == admissionv1.Update {
		oldRaw = req.OldObject.Raw
	}
	errs, kept, raw, oldRaw, err := checkVPAQuantities(req.Object.Raw, oldRaw)
	if err != nil || len(errs) == 0 {
		return raw, oldRaw, kept, nil, err
	}
	status := apierrors.NewInvalid(vpaKind, req.Name, errs).ErrStatus
	h.cfg.Metrics.rejections.WithLabelValues(RejectionQuantity).Inc()
	klog.FromContext(ctx).V(2).Info("Rejected VPA", "vpa", klog.KRef(req.Namespace, req.Name), "operation", req.Operation,
		"reason", RejectionQuantity, "errors", errs.ToAggregate().Error())
	return nil, nil, nil, &admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: kept}, nil
}

// reviewPod applies the recommendation of an InPlace VPA to a new pod. The
// namespace is checked first, then the pod is decoded once, into what the
// decision needs, and the patch is computed from that.
func (h *Handler) reviewPod(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	if req.Resource != podsResource {
		return nil, badRequest("%s handles %s, got a request for %s", MutatePodsPath, gvrString(podsResource), gvrString(req.Resource))
	}
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.SubResource != "" || req.Operation != admissionv1.Create {
		return allowed, nil
	}
	if len(req.Object.Raw) == 0 {
		return nil, badRequest("object: missing: expected a v1 Pod")
	}
	// A pod being created may not carry its namespace yet: the request's
	// is the one. Without a VPA there, there is nothing to decode.
	if ns := req.Namespace; ns != "" && (!h.watches(ns) || (h.namespaces != nil && !h.namespaces.HasVPAs(ns))) {
		return allowed, nil
	}
	view, err := decodePodView(req.Object.Raw)
	if err != nil {
		return nil, badRequest("object: %v", err)
	}
	pod, err := view.pod(req.Namespace)
	if errors.Is(err, errPodTooLarge) {
		h.cfg.Metrics.mutationFailures.WithLabelValues(FailureTooLarge).Inc()
		klog.FromContext(ctx).Info("Admitting a new pod unchanged", "pod", klog.KRef(req.Namespace, req.Name), "err", err)
		return allowed, nil
	}
	if err != nil {
		return nil, badRequest("object: decoding a v1 Pod: %v", err)
	}
	if !h.watches(pod.Namespace) {
		return allowed, nil
	}
	// At creation the name may still be unset (generateName).
	ref := klog.KRef(pod.Namespace, cmp.Or(pod.Name, pod.GenerateName))
	logger := klog.FromContext(ctx).WithValues("pod", ref)
	ctx = klog.NewContext(ctx, logger)

	ops, vpa, step, err := h.podPatch(ctx, view, pod)
	if err != nil {
		h.cfg.Metrics.mutationFailures.WithLabelValues(step).Inc()
		logger.Error(err, "Cannot apply the recommendation to a new pod, admitting it unchanged", "step", step)
		return allowed, nil
	}
	if len(ops) == 0 {
		return allowed, nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		h.cfg.Metrics.mutationFailures.WithLabelValues(FailurePatch).Inc()
		logger.Error(err, "Cannot encode the patch of a new pod, admitting it unchanged")
		return allowed, nil
	}
	h.cfg.Metrics.mutations.Inc()
	if logger.V(2).Enabled() {
		logger.V(2).Info("Applied the recommendation to a new pod", "vpa", klog.KObj(vpa), "operations", len(ops))
	}
	patchType := admissionv1.PatchTypeJSONPatch
	allowed.Patch, allowed.PatchType = patch, &patchType
	return allowed, nil
}

// podPatch works out the patch of a new pod. On failure it names the step
// that failed. A panic in any step is a failure too.
func (h *Handler) podPatch(ctx context.Context, view *podView, pod *corev1.Pod) (ops []PatchOperation, vpa *vpatypes.VerticalPodAutoscaler, step string, err error) {
	step = FailureResolveVPA
	defer func() {
		if r := recover(); r != nil {
			ops, step, err = nil, FailurePanic, fmt.Errorf("panic while %s: %v\n%s", step, r, debug.Stack())
		}
	}()
	vpa, err = h.cfg.VPAs.VPAForPod(ctx, pod)
	if err != nil {
		return nil, nil, step, fmt.Errorf("finding the pod's VPA: %w", err)
	}
	if vpa == nil {
		klog.FromContext(ctx).V(4).Info("No VPA controls the pod")
		return nil, nil, "", nil
	}
	if mode := vpaapiutil.GetUpdateMode(vpa); mode != vpatypes.UpdateModeInPlace {
		klog.FromContext(ctx).V(4).Info("Leaving the pod to its VPA's mode", "vpa", klog.KObj(vpa), "updateMode", mode)
		return nil, vpa, "", nil
	}
	if pod.Spec.Resources != nil {
		// Container values are bounded by pod-level resources, which the
		// recommendation processing does not know: setting them could make
		// the pod invalid, and its creation fail.
		klog.FromContext(ctx).V(2).Info("Leaving a pod with pod-level resources unchanged", "vpa", klog.KObj(vpa))
		return nil, vpa, "", nil
	}
	step = FailureRecommendation
	desired, err := h.cfg.Recommendations.ForPod(pod, vpa)
	if err != nil {
		return nil, vpa, step, fmt.Errorf("computing the recommendation of VPA %s: %w", klog.KObj(vpa), err)
	}
	if len(desired) == 0 {
		klog.FromContext(ctx).V(4).Info("The VPA has no recommendation for the pod yet", "vpa", klog.KObj(vpa))
		return nil, vpa, "", nil
	}
	step = FailurePatch
	ops, err = podPatch(view, pod, desired, vpa.Name)
	if err != nil {
		return nil, vpa, step, fmt.Errorf("building the patch: %w", err)
	}
	return ops, vpa, "", nil
}

func decodeVPA(raw []byte) (*vpatypes.VerticalPodAutoscaler, error) {
	want := vpatypes.SchemeGroupVersion.String()
	if len(raw) == 0 {
		return nil, fmt.Errorf("missing: expected a VerticalPodAutoscaler of apiVersion %s", want)
	}
	var vpa vpatypes.VerticalPodAutoscaler
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &vpa); err != nil {
		return nil, fmt.Errorf("decoding a VerticalPodAutoscaler: %w", err)
	}
	if (vpa.APIVersion != "" || vpa.Kind != "") && (vpa.APIVersion != want || vpa.Kind != "VerticalPodAutoscaler") {
		return nil, fmt.Errorf("expected kind VerticalPodAutoscaler of apiVersion %s, got kind %q of apiVersion %q", want, vpa.Kind, vpa.APIVersion)
	}
	return &vpa, nil
}

func gvrString(r metav1.GroupVersionResource) string {
	if r.Group == "" {
		return r.Version + "/" + r.Resource
	}
	return r.Group + "/" + r.Version + "/" + r.Resource
}
