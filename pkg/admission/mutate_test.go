package admission

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// applyPatch applies the response's JSON Patch to the pod as sent and
// decodes the result.
func applyPatch(t *testing.T, pod string, resp *admissionv1.AdmissionResponse) *corev1.Pod {
	t.Helper()
	require.NotNil(t, resp.PatchType)
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(t, err)
	patched, err := patch.Apply([]byte(pod))
	require.NoError(t, err, "the patch applies to the pod as sent: %s", resp.Patch)
	var out corev1.Pod
	require.NoError(t, json.Unmarshal(patched, &out))
	return &out
}

func requirements(requests, limits corev1.ResourceList) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: requests, Limits: limits}
}

// assertResources compares quantities by value, not by representation.
func assertResources(t *testing.T, want, got corev1.ResourceRequirements, container string) {
	t.Helper()
	for _, l := range []struct {
		what      string
		want, got corev1.ResourceList
	}{{"requests", want.Requests, got.Requests}, {"limits", want.Limits, got.Limits}} {
		assert.Len(t, l.got, len(l.want), "container %s %s: %v", container, l.what, l.got)
		for name, q := range l.want {
			g, ok := l.got[name]
			if assert.True(t, ok, "container %s %s lacks %s", container, l.what, name) {
				assert.Zero(t, q.Cmp(g), "container %s %s %s: want %s, got %s", container, l.what, name, q.String(), g.String())
			}
		}
	}
}

type mutateCase struct {
	name       string
	gate       bool
	vpas       []*vpatypes.VerticalPodAutoscaler
	limitRange *corev1.LimitRangeItem
	operation  string
	pod        string
	// want are the resources of each container after the patch; nil means
	// no patch at all.
	want           map[string]corev1.ResourceRequirements
	wantAnnotation string
	// wantOps, when set, are the exact operations.
	wantOps []PatchOperation
}

func TestMutatePods(t *testing.T) {
	inPlace := func() *testvpa.Builder { return testvpa.New("web").InPlace() }
	list := testpod.List
	tests := []mutateCase{
		{
			name: "InPlace VPA: requests follow the recommendation and limits keep their ratio (gate on)",
			gate: true, vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "300m", "300Mi").Obj()},
			pod:            podJSON("", appContainer),
			want:           map[string]corev1.ResourceRequirements{"app": requirements(list("300m", "300Mi"), list("600m", "600Mi"))},
			wantAnnotation: "Pod resources updated by web: container 0: cpu request, memory request, cpu limit, memory limit",
		},
		{
			name: "InPlace VPA: new pods are mutated with the gate off too (AEP-8818)",
			gate: false, vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "300m", "300Mi").Obj()},
			pod:  podJSON("", appContainer),
			want: map[string]corev1.ResourceRequirements{"app": requirements(list("300m", "300Mi"), list("600m", "600Mi"))},
		},
		{
			name: "controlledValues RequestsOnly leaves limits alone",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "150m", "150Mi").RequestsOnly("app").Obj()},
			pod:  podJSON("", appContainer),
			want: map[string]corev1.ResourceRequirements{"app": requirements(list("150m", "150Mi"), list("200m", "200Mi"))},
		},
		{
			name: "maxAllowed caps the recommendation",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "300m", "300Mi").MaxAllowed("app", "250m", "").Obj()},
			pod:  podJSON("", appContainer),
			want: map[string]corev1.ResourceRequirements{"app": requirements(list("250m", "300Mi"), list("500m", "600Mi"))},
		},
		{
			name:       "LimitRange max caps the limits",
			vpas:       []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "300m", "300Mi").Obj()},
			limitRange: &corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: list("400m", "")},
			pod:        podJSON("", appContainer),
			want:       map[string]corev1.ResourceRequirements{"app": requirements(list("200m", "300Mi"), list("400m", "600Mi"))},
		},
		{
			name: "a container without a resources object gets one",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "300m", "300Mi").Obj()},
			pod:  podJSON("", `[{"name":"app","image":"registry.example/app:1"}]`),
			want: map[string]corev1.ResourceRequirements{"app": requirements(list("300m", "300Mi"), nil)},
			wantOps: []PatchOperation{
				{Op: "add", Path: "/spec/containers/0/resources", Value: map[string]any{"requests": map[string]any{"cpu": "300m", "memory": "300Mi"}}},
				{Op: "add", Path: "/metadata/annotations", Value: map[string]any{
					ResourceUpdatesAnnotation: "Pod resources updated by web: container 0: cpu request, memory request"}},
			},
		},
		{
			name: "a container with an empty resources object gets requests",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "300m", "").Obj()},
			pod:  podJSON("", `[{"name":"app","image":"registry.example/app:1","resources":{}}]`),
			want: map[string]corev1.ResourceRequirements{"app": requirements(list("300m", ""), nil)},
			wantOps: []PatchOperation{
				{Op: "add", Path: "/spec/containers/0/resources/requests", Value: map[string]any{"cpu": "300m"}},
				{Op: "add", Path: "/metadata/annotations", Value: map[string]any{
					ResourceUpdatesAnnotation: "Pod resources updated by web: container 0: cpu request"}},
			},
		},
		{
			name: "existing annotations are kept and only changed values are set",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "100m", "150Mi").RequestsOnly("app").Obj()},
			pod:  podJSON(`"annotations":{"team":"web"},`, appContainer),
			want: map[string]corev1.ResourceRequirements{"app": requirements(list("100m", "150Mi"), list("200m", "200Mi"))},
			wantOps: []PatchOperation{
				{Op: "add", Path: "/spec/containers/0/resources/requests/memory", Value: "150Mi"},
				{Op: "add", Path: "/metadata/annotations/" + ResourceUpdatesAnnotation,
					Value: "Pod resources updated by web: container 0: memory request"},
			},
		},
		{
			name: "only containers with a recommendation change",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("sidecar", "50m", "64Mi").Obj()},
			pod: podJSON("", `[{"name":"app","resources":{"requests":{"cpu":"100m","memory":"100Mi"}}},`+
				`{"name":"sidecar","resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}]`),
			want: map[string]corev1.ResourceRequirements{
				"app":     requirements(list("100m", "100Mi"), nil),
				"sidecar": requirements(list("50m", "64Mi"), nil),
			},
			wantAnnotation: "Pod resources updated by web: container 1: cpu request, memory request",
		},
		{
			name: "the recommendation is already in place: no patch",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "100m", "100Mi").Obj()},
			pod:  podJSON("", appContainer),
		},
		{
			name: "InPlace VPA without a recommendation yet: no patch",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Obj()},
			pod:  podJSON("", appContainer),
		},
		{
			name: "no VPA targets the pod's controller: no patch",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Target("apps/v1", "Deployment", "db").Recommend("app", "300m", "300Mi").Obj()},
			pod:  podJSON("", appContainer),
		},
		{
			name: "a pod without a controller: no patch",
			vpas: []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "300m", "300Mi").Obj()},
			pod:  `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bare","labels":{"app":"web"}},"spec":{"containers":` + appContainer + `}}`,
		},
		{
			name:      "updates of pods are not mutated",
			vpas:      []*vpatypes.VerticalPodAutoscaler{inPlace().Recommend("app", "300m", "300Mi").Obj()},
			operation: "UPDATE",
			pod:       podJSON("", appContainer),
		},
	}
	for _, mode := range []vpatypes.UpdateMode{vpatypes.UpdateModeOff, vpatypes.UpdateModeInitial, vpatypes.UpdateModeRecreate,
		vpatypes.UpdateModeInPlaceOrRecreate, vpatypes.UpdateModeAuto} { //nolint:staticcheck // Auto is deprecated, still served
		tests = append(tests, mutateCase{
			name: "VPA in mode " + string(mode) + ": left to upstream VPA, no patch", gate: true,
			vpas: []*vpatypes.VerticalPodAutoscaler{testvpa.New("web").Mode(mode).Recommend("app", "300m", "300Mi").Obj()},
			pod:  podJSON("", appContainer),
		})
	}
	tests = append(tests, mutateCase{
		name: "VPA without updatePolicy (Recreate): no patch", gate: true,
		vpas: []*vpatypes.VerticalPodAutoscaler{testvpa.New("web").Recommend("app", "300m", "300Mi").Obj()},
		pod:  podJSON("", appContainer),
	})

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, metrics := testHandler{gate: tc.gate, vpas: tc.vpas, limitRange: tc.limitRange}.build(t)
			op := tc.operation
			if op == "" {
				op = "CREATE"
			}
			resp := response(t, post(t, h, MutatePodsPath, podReview(op, tc.pod)))
			require.True(t, resp.Allowed, "pods are always allowed")
			assert.Zero(t, testutil.ToFloat64(metrics.mutationFailures.WithLabelValues(FailureResolveVPA))+
				testutil.ToFloat64(metrics.mutationFailures.WithLabelValues(FailureRecommendation))+
				testutil.ToFloat64(metrics.mutationFailures.WithLabelValues(FailurePatch))+
				testutil.ToFloat64(metrics.mutationFailures.WithLabelValues(FailurePanic)))
			if tc.want == nil {
				assert.Empty(t, resp.Patch, "no patch")
				assert.Nil(t, resp.PatchType)
				assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointMutatePods, OutcomeAllowed)))
				assert.Zero(t, testutil.ToFloat64(metrics.mutations))
				return
			}
			pod := applyPatch(t, tc.pod, resp)
			for _, c := range pod.Spec.Containers {
				assertResources(t, tc.want[c.Name], c.Resources, c.Name)
			}
			assert.Contains(t, pod.Annotations[ResourceUpdatesAnnotation], "Pod resources updated by web: ")
			if tc.wantAnnotation != "" {
				assert.Equal(t, tc.wantAnnotation, pod.Annotations[ResourceUpdatesAnnotation])
			}
			if tc.wantOps != nil {
				var ops []PatchOperation
				require.NoError(t, json.Unmarshal(resp.Patch, &ops))
				assert.Equal(t, tc.wantOps, ops)
			}
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.mutations))
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointMutatePods, OutcomePatched)))
		})
	}
}

func TestMutatePodsKeepsTheRestOfThePod(t *testing.T) {
	h, _ := testHandler{vpas: []*vpatypes.VerticalPodAutoscaler{testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj()}}.build(t)
	pod := podJSON(`"annotations":{"team":"web"},`, `[{"name":"app","image":"registry.example/app:1",`+
		`"resources":{"requests":{"cpu":"100m","memory":"100Mi","ephemeral-storage":"1Gi"},"limits":{"cpu":"200m","memory":"200Mi","nvidia.com/gpu":"1"},`+
		`"claims":[{"name":"gpu"}]}}]`)
	got := applyPatch(t, pod, response(t, post(t, h, MutatePodsPath, podReview("CREATE", pod))))
	c := got.Spec.Containers[0]
	assert.Equal(t, "registry.example/app:1", c.Image)
	assert.Equal(t, []corev1.ResourceClaim{{Name: "gpu"}}, c.Resources.Claims)
	assert.Zero(t, c.Resources.Requests.StorageEphemeral().Cmp(resource.MustParse("1Gi")))
	assert.Zero(t, c.Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Cmp(resource.MustParse("1")))
	assert.Equal(t, "web", got.Annotations["team"])
	assert.Equal(t, "web-7d9f8-", got.GenerateName)
	assert.Empty(t, got.Name)
}

// A pod created by a custom controller without /scale gets the
// recommendation of the VPA whose targetRef names that controller, whatever
// its labels.
func TestMutatePodsOfCustomController(t *testing.T) {
	vpa := testvpa.New("kafka").Target("e2e.vpa-inplace.dev/v1", "PodSet", "kafka").InPlace().Recommend("app", "300m", "300Mi").Obj()
	h, _ := testHandler{gate: true, vpas: []*vpatypes.VerticalPodAutoscaler{vpa}}.build(t)
	podOf := func(podSet string) string {
		return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + podSet + `-0",` +
			`"ownerReferences":[{"apiVersion":"e2e.vpa-inplace.dev/v1","kind":"PodSet","name":"` + podSet + `","uid":"ps-uid","controller":true}]},` +
			`"spec":{"containers":` + appContainer + `}}`
	}

	pod := podOf("kafka")
	got := applyPatch(t, pod, response(t, post(t, h, MutatePodsPath, podReview("CREATE", pod))))
	assertResources(t, requirements(testpod.List("300m", "300Mi"), testpod.List("600m", "600Mi")), got.Spec.Containers[0].Resources, "app")

	resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", podOf("zookeeper"))))
	assert.True(t, resp.Allowed)
	assert.Empty(t, resp.Patch, "another PodSet's pod is not the VPA's")
}

func TestMutatePodsSkipsNamespacesNotHandled(t *testing.T) {
	vpas := []*vpatypes.VerticalPodAutoscaler{testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj()}
	for name, c := range map[string]testHandler{
		"ignored namespace":             {vpas: vpas, ignored: []string{"default"}},
		"outside the watched namespace": {vpas: vpas, namespace: "team-a"},
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := c.build(t)
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", podJSON("", appContainer))))
			assert.True(t, resp.Allowed)
			assert.Empty(t, resp.Patch)
		})
	}
}

func TestMutatePodsSubresourceIsNotMutated(t *testing.T) {
	h, _ := testHandler{vpas: []*vpatypes.VerticalPodAutoscaler{testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj()}}.build(t)
	body := strings.Replace(podReview("CREATE", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"n"}}`),
		`"namespace":"default"`, `"subResource":"binding","namespace":"default"`, 1)
	resp := response(t, post(t, h, MutatePodsPath, body))
	assert.True(t, resp.Allowed)
	assert.Empty(t, resp.Patch)
}

type failingResolver struct {
	err   error
	panic bool
	block bool
}

func (f failingResolver) VPAForPod(ctx context.Context, _ *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	if f.panic {
		panic("resolver bug")
	}
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, f.err
}

type failingRecommender struct{}

func (failingRecommender) ForPod(*corev1.Pod, *vpatypes.VerticalPodAutoscaler) (recommendation.Desired, error) {
	return nil, errors.New("capping failed")
}

// Pod creation never depends on this webhook: internal failures admit the
// pod unchanged and are counted.
func TestMutatePodsAdmitsThePodOnInternalFailure(t *testing.T) {
	vpas := []*vpatypes.VerticalPodAutoscaler{testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj()}
	tests := []struct {
		name     string
		handler  testHandler
		wantStep string
	}{
		{"finding the VPA fails", testHandler{resolver: failingResolver{err: errors.New("scale subresource: forbidden")}}, FailureResolveVPA},
		{"finding the VPA runs out of time", testHandler{resolver: failingResolver{block: true}, timeout: 50 * time.Millisecond}, FailureResolveVPA},
		{"finding the VPA panics", testHandler{resolver: failingResolver{panic: true}}, FailurePanic},
		{"computing the recommendation fails", testHandler{vpas: vpas, recommender: failingRecommender{}}, FailureRecommendation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, metrics := tc.handler.build(t)
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", podJSON("", appContainer))))
			assert.True(t, resp.Allowed)
			assert.Empty(t, resp.Patch)
			assert.Nil(t, resp.Result)
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.mutationFailures.WithLabelValues(tc.wantStep)))
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointMutatePods, OutcomeAllowed)))
		})
	}
}

func TestPodPatchRejectsMismatchedShapes(t *testing.T) {
	pod := testpod.New("p").Container("app", "100m", "100Mi").Obj()
	desired := recommendation.Desired{"app": {Requests: testpod.List("200m", "")}}
	_, err := PodPatch([]byte(`{"spec":{"containers":[]}}`), pod, desired, "web")
	assert.Error(t, err)
	_, err = PodPatch([]byte(`[]`), pod, desired, "web")
	assert.Error(t, err)
}

func TestPodPatchAddsMetadataWhenMissing(t *testing.T) {
	raw := `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"100m"}}}]}}`
	pod := testpod.New("p").Container("app", "100m", "").Obj()
	ops, err := PodPatch([]byte(raw), pod, recommendation.Desired{"app": {Requests: testpod.List("200m", "")}}, "web")
	require.NoError(t, err)
	b, err := json.Marshal(ops)
	require.NoError(t, err)
	patch, err := jsonpatch.DecodePatch(b)
	require.NoError(t, err)
	out, err := patch.Apply([]byte(raw))
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"annotations":{"vpaUpdates":"Pod resources updated by web: container 0: cpu request"}},`+
		`"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"200m"}}}]}}`, string(out))
}
