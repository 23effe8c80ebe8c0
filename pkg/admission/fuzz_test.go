package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	sigsjson "sigs.k8s.io/json"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/annotations"

	boostpkg "github.com/vpa-inplace/vpa-inplace/pkg/boost"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// everyPod is the InPlace VPA of every pod, so that fuzzed pods reach the
// recommendation and the patch.
type everyPod struct {
	vpa *vpatypes.VerticalPodAutoscaler
}

func (e everyPod) VPAForPod(context.Context, *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	return e.vpa, nil
}

// FuzzHandleAdmissionReview feeds arbitrary bodies to both endpoints. The
// handler must answer 200 with an AdmissionReview echoing the request's UID,
// or 400; never panic. A patch must apply to the pod as sent, record what it
// set, and yield a valid pod from a valid one.
func FuzzHandleAdmissionReview(f *testing.F) {
	for _, seed := range []struct {
		validate bool
		body     string
	}{
		{true, vpaReview("CREATE", withMode("InPlace"), "null")},
		{true, vpaReview("UPDATE", withMode("InPlace"), withMode("Recreate"))},
		{true, vpaReview("UPDATE", withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"1e-99999999"}}]`),
			withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"1e-99999999"}}]`))},
		{true, vpaReview("CREATE", withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"2"},"maxAllowed":{"cpu":"1"},"controlledResources":["gpu"]}]`), "null")},
		{false, podReview("CREATE", podJSON("", appContainer))},
		{false, podReview("CREATE", podJSON(`"annotations":{"a":"b"},`, `[{"name":"app"},{"name":"sidecar","resources":{}}]`))},
		{false, podReview("CREATE", `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"sidecar","resources":{"limits":{"cpu":"1"}}}]}}`)},
		{false, podReview("CREATE", strings.Replace(podJSON("", appContainer), `"spec":{`,
			`"spec":{"initContainers":[{"name":"setup"},{"name":"sidecar","restartPolicy":"Always","resources":{"limits":{"memory":"128Mi"}}}],`, 1))},
		{false, podReview("CREATE", strings.Replace(podJSON("", appContainer), `"spec":{`,
			`"spec":{"initContainers":[null,{"name":"sidecar","restartPolicy":"Always"}],`, 1))},
		{false, podReview("UPDATE", podJSON("", appContainer))},
		{false, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`},
		{true, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`},
		{false, `not json`},
		{true, ``},
	} {
		f.Add(seed.validate, false, []byte(seed.body))
		f.Add(seed.validate, true, []byte(seed.body))
	}
	f.Add(false, true, []byte(podReview("CREATE", podJSON(`"annotations":{"vpaCpuStartupBoost/sidecar":"{}"},`,
		`[{"name":"app","resources":{"limits":{"cpu":"1"}}},{"name":"sidecar","resources":{"requests":{"cpu":"10m"}}},`+
			`{"name":"cold","resources":{"requests":{"cpu":"10m"}},"resizePolicy":[{"resourceName":"cpu","restartPolicy":"RestartContainer"}]}]`))))

	vpa := testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Recommend("sidecar", "50m", "64Mi").Obj()
	h, _ := testHandler{gate: false, resolver: everyPod{vpa}}.build(f)
	// The same VPA with a CPU startup boost, both gates on.
	boosted := factorBoost(testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Recommend("sidecar", "50m", "64Mi"), 2)
	hBoost, _ := testHandler{boost: true, resolver: everyPod{boosted}}.build(f)
	ctx := klog.NewContext(context.Background(), logr.Discard())

	f.Fuzz(func(t *testing.T, validate, boost bool, body []byte) {
		path := MutatePodsPath
		if validate {
			path = ValidateVPAsPath
		}
		h := h
		if boost {
			h = hBoost
		}
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		switch rec.Code {
		case http.StatusBadRequest:
			if rec.Body.Len() == 0 {
				t.Fatal("a 400 must say why")
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}

		var in admissionv1.AdmissionReview
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &in); err != nil || in.Request == nil {
			t.Fatalf("answered 200 to a body that is not a review: %v", err)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("the response is not JSON: %v", err)
		}
		if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
			t.Fatalf("not an admission.k8s.io/v1 AdmissionReview response: %s", rec.Body.String())
		}
		if out.Response.UID != in.Request.UID {
			t.Fatalf("uid %q not echoed: got %q", in.Request.UID, out.Response.UID)
		}
		if !out.Response.Allowed && (!validate || out.Response.Result == nil || out.Response.Result.Code != http.StatusUnprocessableEntity) {
			t.Fatalf("only VPAs are rejected, with a reason: %s", rec.Body.String())
		}
		if len(out.Response.Patch) == 0 {
			return
		}
		if validate {
			t.Fatalf("VPAs are never patched: %s", out.Response.Patch)
		}
		patch, err := jsonpatch.DecodePatch(out.Response.Patch)
		if err != nil {
			t.Fatalf("the patch is not a JSON Patch: %v", err)
		}
		patched, err := patch.Apply(in.Request.Object.Raw)
		if err != nil {
			t.Fatalf("the patch %s does not apply to %s: %v", out.Response.Patch, in.Request.Object.Raw, err)
		}
		// The handler reads only what the mutation needs of a pod: a pod
		// that is not a valid v1 Pod elsewhere can be patched. The patch
		// must then keep a valid pod valid.
		var sent, pod corev1.Pod
		if sigsjson.UnmarshalCaseSensitivePreserveInts(in.Request.Object.Raw, &sent) == nil {
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(patched, &pod); err != nil {
				t.Fatalf("the patched pod does not decode: %v", err)
			}
		}
		var meta, sentMeta struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Containers []corev1.Container `json:"containers"`
			} `json:"spec"`
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(patched, &meta); err != nil {
			t.Fatalf("the patched pod does not decode: %v", err)
		}
		_ = sigsjson.UnmarshalCaseSensitivePreserveInts(in.Request.Object.Raw, &sentMeta)
		boosts := 0
		for _, c := range sentMeta.Spec.Containers {
			key := boostpkg.AnnotationKey(c.Name)
			value, added := meta.Metadata.Annotations[key]
			if sent, ok := sentMeta.Metadata.Annotations[key]; ok {
				if value != sent {
					t.Fatalf("the annotation %s on the pod as sent was changed: %q to %q", key, sent, value)
				}
				continue
			}
			if !added {
				continue
			}
			boosts++
			// Upstream's reader finds the container as sent.
			original, err := annotations.GetOriginalResourcesFromAnnotation(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Annotations: meta.Metadata.Annotations}}, c.Name)
			if err != nil || original == nil {
				t.Fatalf("upstream cannot read %s=%q: %v", key, value, err)
			}
			for _, l := range []struct{ sent, recorded corev1.ResourceList }{
				{c.Resources.Requests, original.Requests}, {c.Resources.Limits, original.Limits}} {
				for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					q, ok := l.sent[name]
					r, rok := l.recorded[name]
					if ok != rok || (ok && q.Cmp(r) != 0) {
						t.Fatalf("%s records %v for %s, sent %v", key, l.recorded, name, l.sent)
					}
				}
			}
		}
		if meta.Metadata.Annotations[ResourceUpdatesAnnotation] == "" && boosts == 0 {
			t.Fatalf("a patched pod records what was set: %s", patched)
		}
	})
}
