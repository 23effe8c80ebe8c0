package admission

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// Requests that are not a well-formed AdmissionReview for the endpoint get an
// HTTP error with the reason, never a panic and never an admission decision.
func TestMalformedRequests(t *testing.T) {
	vpaCreate := vpaReview("CREATE", withMode("InPlace"), "null")
	podCreate := podReview("CREATE", podJSON("", appContainer))
	tests := []struct {
		name        string
		path        string
		body        string
		wantMessage string
	}{
		{"not JSON", MutatePodsPath, `{"apiVersion":`, "decoding the AdmissionReview"},
		{"empty body", ValidateVPAsPath, ``, "empty request body"},
		{"JSON that is not an object", ValidateVPAsPath, `[1,2,3]`, "decoding the AdmissionReview"},
		{"trailing data after the review", MutatePodsPath, podCreate + `{}`, "decoding the AdmissionReview"},
		{"wrong kind", ValidateVPAsPath, strings.Replace(vpaCreate, `"kind":"AdmissionReview"`, `"kind":"Pod"`, 1),
			`expected kind AdmissionReview of apiVersion admission.k8s.io/v1, got kind "Pod"`},
		{"admission.k8s.io/v1beta1", MutatePodsPath, strings.Replace(podCreate, `admission.k8s.io/v1"`, `admission.k8s.io/v1beta1"`, 1),
			`got kind "AdmissionReview" of apiVersion "admission.k8s.io/v1beta1"`},
		{"no apiVersion or kind", MutatePodsPath, `{"request":{"uid":"x"}}`, "expected kind AdmissionReview"},
		{"no request", ValidateVPAsPath, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "has no request"},
		{"a response instead of a request", MutatePodsPath,
			`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}`, "has no request"},
		{"no uid", MutatePodsPath, strings.Replace(podCreate, `"uid":"`+reviewUID+`",`, ``, 1), "has no uid"},
		{"request of the wrong type", ValidateVPAsPath, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"yes"}`,
			"decoding the AdmissionReview"},
		{"pod sent to the VPA endpoint", ValidateVPAsPath, podCreate,
			"/validate-vpas handles autoscaling.k8s.io/v1/verticalpodautoscalers, got a request for v1/pods"},
		{"VPA sent to the pod endpoint", MutatePodsPath, vpaCreate,
			"/mutate-pods handles v1/pods, got a request for autoscaling.k8s.io/v1/verticalpodautoscalers"},
		{"v1beta2 VPAs", ValidateVPAsPath, strings.ReplaceAll(vpaCreate, `"version":"v1"`, `"version":"v1beta2"`),
			"got a request for autoscaling.k8s.io/v1beta2/verticalpodautoscalers"},
		{"object of the wrong kind", ValidateVPAsPath, vpaReview("CREATE", podJSON("", appContainer), "null"),
			`object: expected kind VerticalPodAutoscaler of apiVersion autoscaling.k8s.io/v1, got kind "Pod" of apiVersion "v1"`},
		{"pod object of the wrong kind", MutatePodsPath, podReview("CREATE", withMode("InPlace")),
			`object: expected kind Pod of apiVersion v1, got kind "VerticalPodAutoscaler"`},
		{"object that is not an object", MutatePodsPath, podReview("CREATE", `"a pod"`), "object: decoding a v1 Pod"},
		{"object with a wrongly typed field", MutatePodsPath, podReview("CREATE", `{"apiVersion":"v1","kind":"Pod","spec":{"containers":{"name":"app"}}}`),
			"object: decoding a v1 Pod"},
		{"malformed quantity", ValidateVPAsPath, vpaReview("CREATE", withPolicy(`[{"containerName":"app","maxAllowed":{"cpu":"lots"}}]`), "null"),
			"object: decoding a VerticalPodAutoscaler"},
		{"no object", MutatePodsPath, podReview("CREATE", "null"), "object: missing: expected a v1 Pod"},
		{"update without oldObject", ValidateVPAsPath, vpaReview("UPDATE", withMode("InPlace"), "null"), "oldObject: missing"},
		{"update with a malformed oldObject", ValidateVPAsPath, vpaReview("UPDATE", withMode("InPlace"), `{"spec":7}`), "oldObject: decoding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, metrics := testHandler{gate: true, vpas: []*vpatypes.VerticalPodAutoscaler{
				testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj()}}.build(t)
			rec := post(t, h, tc.path, tc.body)
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			assert.Contains(t, rec.Body.String(), tc.wantMessage)
			endpoint := EndpointMutatePods
			if tc.path == ValidateVPAsPath {
				endpoint = EndpointValidateVPAs
			}
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(endpoint, OutcomeBadRequest)))
		})
	}
}

func TestOversizedRequests(t *testing.T) {
	h, metrics := testHandler{}.build(t)
	// A valid review, padded with whitespace beyond the limit.
	body := vpaReview("CREATE", withMode("Off"), "null") + strings.Repeat(" ", int(DefaultMaxRequestBytes))
	_, ctx := ktesting.NewTestContext(t)

	t.Run("declared length over the limit", func(t *testing.T) {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, ValidateVPAsPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		assert.Contains(t, rec.Body.String(), "exceeds the limit of 6291456 bytes")
	})
	t.Run("streamed body over the limit", func(t *testing.T) {
		// No Content-Length: the limit applies while reading.
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, MutatePodsPath, io.MultiReader(strings.NewReader(body)))
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		assert.Contains(t, rec.Body.String(), "request body exceeds the limit of 6291456 bytes")
	})
	t.Run("a smaller configured limit", func(t *testing.T) {
		small, _ := testHandler{maxBytes: 100}.build(t)
		rec := post(t, small, ValidateVPAsPath, vpaReview("CREATE", withMode("Off"), "null"))
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		assert.Contains(t, rec.Body.String(), "exceeds the limit of 100 bytes")
	})
	t.Run("a review just under the limit is handled", func(t *testing.T) {
		review := vpaReview("CREATE", withMode("Off"), "null")
		padded := review + strings.Repeat(" ", int(DefaultMaxRequestBytes)-len(review))
		resp := response(t, post(t, h, ValidateVPAsPath, padded))
		assert.True(t, resp.Allowed)
	})
	assert.Equal(t, 2.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointValidateVPAs, OutcomeBadRequest))+
		testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointMutatePods, OutcomeBadRequest)))
}

func TestMethodAndContentType(t *testing.T) {
	h, _ := testHandler{}.build(t)
	_, ctx := ktesting.NewTestContext(t)
	body := vpaReview("CREATE", withMode("Off"), "null")
	tests := []struct {
		name        string
		method      string
		contentType string
		path        string
		wantCode    int
		wantMessage string
	}{
		{"GET is not allowed", http.MethodGet, "application/json", ValidateVPAsPath, http.StatusMethodNotAllowed, "method GET is not allowed: use POST"},
		{"PUT is not allowed", http.MethodPut, "application/json", MutatePodsPath, http.StatusMethodNotAllowed, "use POST"},
		{"no content type", http.MethodPost, "", ValidateVPAsPath, http.StatusUnsupportedMediaType, `content type "" is not supported`},
		{"text/plain", http.MethodPost, "text/plain", MutatePodsPath, http.StatusUnsupportedMediaType, "use application/json"},
		{"YAML", http.MethodPost, "application/yaml", ValidateVPAsPath, http.StatusUnsupportedMediaType, "use application/json"},
		{"malformed content type", http.MethodPost, "application/json;;", ValidateVPAsPath, http.StatusUnsupportedMediaType, "not supported"},
		{"JSON with a charset is accepted", http.MethodPost, "application/json; charset=utf-8", ValidateVPAsPath, http.StatusOK, `"allowed":true`},
		{"unknown path", http.MethodPost, "application/json", "/mutate", http.StatusNotFound, "404"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequestWithContext(ctx, tc.method, tc.path, bytes.NewReader([]byte(body)))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tc.wantCode, rec.Code)
			assert.Contains(t, rec.Body.String(), tc.wantMessage)
			if tc.wantCode == http.StatusMethodNotAllowed {
				assert.Equal(t, http.MethodPost, rec.Header().Get("Allow"))
			}
		})
	}
}

func TestNewHandlerNeedsItsParts(t *testing.T) {
	_, err := NewHandler(Config{})
	require.Error(t, err)
	for _, part := range []string{"feature gate", "VPA resolver", "recommender", "metrics"} {
		assert.Contains(t, err.Error(), part)
	}
}
