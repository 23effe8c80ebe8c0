package admission

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// benchMutate reviews the pod of benchPod (a ReplicaSet's, three
// containers) with h, in a loop.
func benchMutate(b *testing.B, h http.Handler) {
	body := podReview("CREATE", benchPod)
	ctx := klog.NewContext(context.Background(), logr.Discard())
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, MutatePodsPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"patch"`) {
			b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	}
}

// BenchmarkMutatePod: a new pod of an InPlace VPA without a startup boost.
func BenchmarkMutatePod(b *testing.B) {
	vpa := testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj()
	h, _ := testHandler{gate: true, vpas: []*vpatypes.VerticalPodAutoscaler{vpa}}.build(b)
	benchMutate(b, h)
}

// BenchmarkMutatePodBoosted: the same pod, its VPA with a CPU startup
// boost, both gates on.
func BenchmarkMutatePodBoosted(b *testing.B) {
	vpa := factorBoost(testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi"), 2)
	h, _ := testHandler{boost: true, vpas: []*vpatypes.VerticalPodAutoscaler{vpa}}.build(b)
	benchMutate(b, h)
}

// BenchmarkMutatePodBoostedWithinLimits: the same, in a namespace with a
// LimitRange (max and maxLimitRequestRatio per container and per pod) and
// a ResourceQuota, which the boost is kept within (it is capped here).
func BenchmarkMutatePodBoostedWithinLimits(b *testing.B) {
	vpa := factorBoost(testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi"), 2)
	lr := limitRangeOf(cpuItem(corev1.LimitTypeContainer, "500m", "4"))
	lr.Spec.Limits = append(lr.Spec.Limits, cpuItem(corev1.LimitTypePod, "4", "4"))
	h, _ := testHandler{boost: true, vpas: []*vpatypes.VerticalPodAutoscaler{vpa}, limitRanges: []*corev1.LimitRange{lr},
		quotas: []*corev1.ResourceQuota{quotaOf("compute", cpu(corev1.ResourceRequestsCPU, "100"), cpu(corev1.ResourceRequestsCPU, "10"))}}.build(b)
	benchMutate(b, h)
}
