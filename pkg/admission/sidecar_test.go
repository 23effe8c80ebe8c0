package admission

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// podWithInit is podJSON with spec.initContainers too.
func podWithInit(initContainers, containers string) string {
	return strings.Replace(podJSON("", containers), `"spec":{`, `"spec":{"initContainers":`+initContainers+`,`, 1)
}

// setup is an init container that is not a sidecar; proxy is a sidecar
// (restartPolicy Always) with requests 10m/16Mi and a 64Mi memory limit.
const (
	setupInit = `{"name":"setup","image":"registry.example/setup:1","resources":{"requests":{"cpu":"1","memory":"1Gi"}}}`
	proxyInit = `{"name":"proxy","image":"registry.example/proxy:1","restartPolicy":"Always",` +
		`"resources":{"requests":{"cpu":"10m","memory":"16Mi"},"limits":{"memory":"64Mi"}}}`
)

func TestMutatePodsSetsSidecars(t *testing.T) {
	list := testpod.List
	inPlace := func() *testvpa.Builder { return testvpa.New("web").InPlace() }
	tests := []struct {
		name string
		vpa  *vpatypes.VerticalPodAutoscaler
		pod  string
		// init are the resources of each init container after the patch,
		// containers those of each container; nil init: no patch at all.
		init, containers map[string]corev1.ResourceRequirements
		annotation       string
		ops              []PatchOperation
	}{
		{
			name: "a sidecar gets its recommendation, its memory limit in proportion",
			vpa:  inPlace().Recommend("proxy", "20m", "32Mi").Obj(),
			pod:  podWithInit(`[`+setupInit+`,`+proxyInit+`]`, appContainer),
			init: map[string]corev1.ResourceRequirements{
				"setup": requirements(list("1", "1Gi"), nil),
				"proxy": requirements(list("20m", "32Mi"), list("", "128Mi")),
			},
			containers: map[string]corev1.ResourceRequirements{"app": requirements(list("100m", "100Mi"), list("200m", "200Mi"))},
			annotation: "Pod resources updated by web: init-sidecar 1: cpu request, memory request, memory limit",
			ops: []PatchOperation{
				{Op: "add", Path: "/spec/initContainers/1/resources/requests/cpu", Value: "20m"},
				{Op: "add", Path: "/spec/initContainers/1/resources/requests/memory", Value: "32Mi"},
				{Op: "add", Path: "/spec/initContainers/1/resources/limits/memory", Value: "128Mi"},
				{Op: "add", Path: "/metadata/annotations", Value: map[string]any{ResourceUpdatesAnnotation: "Pod resources updated by web: init-sidecar 1: cpu request, memory request, memory limit"}},
			},
		},
		{
			name: "an app container and a sidecar in one patch",
			vpa:  inPlace().Recommend("app", "300m", "300Mi").Recommend("proxy", "20m", "32Mi").RequestsOnly("proxy").Obj(),
			pod:  podWithInit(`[`+proxyInit+`]`, appContainer),
			init: map[string]corev1.ResourceRequirements{"proxy": requirements(list("20m", "32Mi"), list("", "64Mi"))},
			containers: map[string]corev1.ResourceRequirements{
				"app": requirements(list("300m", "300Mi"), list("600m", "600Mi")),
			},
			annotation: "Pod resources updated by web: container 0: cpu request, memory request, cpu limit, memory limit; init-sidecar 0: cpu request, memory request",
		},
		{
			name: "a sidecar without a resources object gets one",
			vpa:  inPlace().Recommend("proxy", "20m", "32Mi").Obj(),
			pod:  podWithInit(`[{"name":"proxy","restartPolicy":"Always"}]`, appContainer),
			init: map[string]corev1.ResourceRequirements{"proxy": requirements(list("20m", "32Mi"), nil)},
			ops: []PatchOperation{
				{Op: "add", Path: "/spec/initContainers/0/resources", Value: map[string]any{"requests": map[string]any{"cpu": "20m", "memory": "32Mi"}}},
				{Op: "add", Path: "/metadata/annotations", Value: map[string]any{ResourceUpdatesAnnotation: "Pod resources updated by web: init-sidecar 0: cpu request, memory request"}},
			},
		},
		{
			name: "an init container that is not a sidecar gets nothing",
			vpa:  inPlace().Recommend("setup", "2", "2Gi").Obj(),
			pod:  podWithInit(`[`+setupInit+`]`, appContainer),
		},
		{
			name: "an init container with restartPolicy Never gets nothing",
			vpa:  inPlace().Recommend("once", "2", "2Gi").Obj(),
			pod:  podWithInit(`[{"name":"once","restartPolicy":"Never","resources":{}}]`, appContainer),
		},
		{
			name: "a sidecar named as an app container gets nothing (the API server refuses the pod)",
			vpa:  inPlace().Recommend("app", "100m", "100Mi").Obj(),
			pod:  podWithInit(`[{"name":"app","restartPolicy":"Always","resources":{"requests":{"cpu":"1m"}}}]`, appContainer),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, metrics := testHandler{vpas: []*vpatypes.VerticalPodAutoscaler{tc.vpa}}.build(t)
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", tc.pod)))
			require.True(t, resp.Allowed)
			if tc.init == nil {
				assert.Empty(t, resp.Patch, "no patch")
				return
			}
			pod := applyPatch(t, tc.pod, resp)
			require.Len(t, pod.Spec.InitContainers, len(tc.init))
			for _, c := range pod.Spec.InitContainers {
				assertResources(t, tc.init[c.Name], c.Resources, c.Name)
			}
			for _, c := range pod.Spec.Containers {
				if want, ok := tc.containers[c.Name]; ok {
					assertResources(t, want, c.Resources, c.Name)
				}
			}
			if tc.annotation != "" {
				assert.Equal(t, tc.annotation, pod.Annotations[ResourceUpdatesAnnotation])
			}
			if tc.ops != nil {
				var ops []PatchOperation
				require.NoError(t, json.Unmarshal(resp.Patch, &ops))
				assert.Equal(t, tc.ops, ops)
			}
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.mutations))
		})
	}
}

// The patch the handler writes for sidecars is encoding/json of the
// operations, whatever maps exist.
func TestPatchJSONOfSidecars(t *testing.T) {
	pod := testpod.New("p").InitContainer("setup", "1", "").Container("app", "100m", "100Mi").Sidecar("proxy", "10m", "16Mi").Obj()
	desired := recommendation.Desired{
		"app":   {Requests: testpod.List("300m", "300Mi")},
		"proxy": {Requests: testpod.List("20m", "32Mi"), Limits: testpod.List("", "64Mi")},
		"setup": {Requests: testpod.List("2", "")},
	}
	for _, tc := range []struct {
		name  string
		shape containerShape
	}{
		{"values set one by one", containerShape{resources: true, requests: true, limits: true}},
		{"no limits map", containerShape{resources: true, requests: true}},
		{"no resources object", containerShape{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shape := podShape{metadata: true, spec: true, containers: []containerShape{{resources: true, requests: true}},
				initContainers: []containerShape{{resources: true, requests: true}, tc.shape}}
			want, got := patchJSONs(t, &shape, pod, desired, "web")
			assert.Equal(t, string(want), string(got))
			assert.Contains(t, string(got), `"/spec/initContainers/1/resources`)
			assert.NotContains(t, string(got), `/spec/initContainers/0`, "an init container that is not a sidecar is never patched")
		})
	}
	t.Run("a shape without the init containers is refused", func(t *testing.T) {
		shape := podShape{metadata: true, spec: true, containers: []containerShape{{}}}
		b := &patchBuilder{}
		assert.Error(t, b.build(&shape, pod, desired, "web", nil))
	})
}
