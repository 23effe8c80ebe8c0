package admission

import (
	"cmp"
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	sigsjson "sigs.k8s.io/json"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
)

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
