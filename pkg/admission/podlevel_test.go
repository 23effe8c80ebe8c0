package admission

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// withPodLevelJSON puts pod-level resources (a JSON object) into a pod's
// JSON.
func withPodLevelJSON(pod, resources string) string {
	return strings.Replace(pod, `"spec":{`, `"spec":{"resources":`+resources+`,`, 1)
}

// sideContainer is a container "side" that sets no resources.
const sideContainer = `{"name":"side","image":"registry.example/side:1"}`

// podLevelConsistent checks what the API server checks of a new pod's
// pod-level resources (validatePodResourceConsistency, and requests within
// limits): the containers' aggregate requests within the pod-level
// requests, each container's limit within the pod-level limit.
func podLevelConsistent(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	lvl := pod.Spec.Resources
	require.NotNil(t, lvl)
	agg := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, req := range lvl.Requests {
		if a, ok := agg[name]; ok {
			assert.LessOrEqual(t, a.Cmp(req), 0, "aggregate %s request %s over the pod-level request %s", name, a.String(), req.String())
		}
		if lim, ok := lvl.Limits[name]; ok {
			assert.LessOrEqual(t, req.Cmp(lim), 0, "pod-level %s request over its limit", name)
		}
	}
	for _, c := range pod.Spec.Containers {
		for name, l := range c.Resources.Limits {
			if lim, ok := lvl.Limits[name]; ok {
				assert.LessOrEqual(t, l.Cmp(lim), 0, "container %s %s limit %s over the pod-level limit %s", c.Name, name, l.String(), lim.String())
			}
		}
	}
}

func TestMutatePodsWithPodLevelResources(t *testing.T) {
	list := testpod.List
	tests := []struct {
		name           string
		vpa            *vpatypes.VerticalPodAutoscaler
		pod            string
		want           map[string]corev1.ResourceRequirements
		wantPodLevel   corev1.ResourceRequirements
		wantAnnotation string
	}{
		{
			name: "the containers get the recommendation, the pod-level values follow: requests by as much, limits in proportion",
			vpa:  testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj(),
			pod: withPodLevelJSON(podJSON("", appContainer),
				`{"requests":{"cpu":"200m","memory":"200Mi"},"limits":{"cpu":"400m","memory":"400Mi"}}`),
			want:           map[string]corev1.ResourceRequirements{"app": requirements(list("300m", "300Mi"), list("600m", "600Mi"))},
			wantPodLevel:   requirements(list("400m", "400Mi"), list("800m", "800Mi")),
			wantAnnotation: "Pod resources updated by web: container 0: cpu request, memory request, cpu limit, memory limit; pod: cpu request, memory request, cpu limit, memory limit",
		},
		{
			name: "a lower recommendation: the pod-level values come down with the containers",
			vpa:  testvpa.New("web").InPlace().Recommend("app", "50m", "50Mi").Obj(),
			pod: withPodLevelJSON(podJSON("", appContainer),
				`{"requests":{"cpu":"200m","memory":"200Mi"},"limits":{"cpu":"400m","memory":"400Mi"}}`),
			want:         map[string]corev1.ResourceRequirements{"app": requirements(list("50m", "50Mi"), list("100m", "100Mi"))},
			wantPodLevel: requirements(list("150m", "150Mi"), list("300m", "300Mi")),
		},
		{
			name: "a container that sets nothing shares the pod's resources: it is not given the recommendation",
			vpa:  testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Recommend("side", "50m", "64Mi").Obj(),
			pod: withPodLevelJSON(podJSON("", "["+strings.Trim(appContainer, "[]")+","+sideContainer+"]"),
				`{"requests":{"cpu":"1","memory":"1Gi"}}`),
			want: map[string]corev1.ResourceRequirements{
				"app":  requirements(list("300m", "300Mi"), list("600m", "600Mi")),
				"side": {},
			},
			wantPodLevel: requirements(list("1200m", "1224Mi"), nil),
		},
		{
			name: "pod-level limits only, requests left to the API server's defaulting (1.37): the limits cover the containers",
			vpa:  testvpa.New("web").InPlace().Recommend("app", "300m", "100Mi").Obj(),
			pod: withPodLevelJSON(podJSON("", `[{"name":"app","image":"registry.example/app:1","resources":{"requests":{"cpu":"100m"},"limits":{"cpu":"150m"}}}]`),
				`{"limits":{"cpu":"200m"}}`),
			want:         map[string]corev1.ResourceRequirements{"app": requirements(list("300m", "100Mi"), list("450m", ""))},
			wantPodLevel: requirements(nil, list("450m", "")),
		},
		{
			name: "Guaranteed pod-level values stay equal",
			vpa:  testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj(),
			pod: withPodLevelJSON(podJSON("", appContainer),
				`{"requests":{"cpu":"400m","memory":"400Mi"},"limits":{"cpu":"400m","memory":"400Mi"}}`),
			want:         map[string]corev1.ResourceRequirements{"app": requirements(list("300m", "300Mi"), list("600m", "600Mi"))},
			wantPodLevel: requirements(list("600m", "600Mi"), list("600m", "600Mi")),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := testHandler{gate: true, vpas: []*vpatypes.VerticalPodAutoscaler{tc.vpa}}.build(t)
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", tc.pod)))
			require.True(t, resp.Allowed)
			pod := applyPatch(t, tc.pod, resp)
			for _, c := range pod.Spec.Containers {
				assertResources(t, tc.want[c.Name], c.Resources, c.Name)
			}
			require.NotNil(t, pod.Spec.Resources)
			assertResources(t, tc.wantPodLevel, *pod.Spec.Resources, "(pod level)")
			podLevelConsistent(t, pod)
			if tc.wantAnnotation != "" {
				assert.Equal(t, tc.wantAnnotation, pod.Annotations[ResourceUpdatesAnnotation])
			}
			// PodPatch gives the same operations as the handler's encoder.
			decoded, _, err := decodePod([]byte(tc.pod), "default")
			require.NoError(t, err)
			desired, err := recommendation.NewCalculator(limitrange.NewNoopLimitsCalculator()).ForPod(decoded, tc.vpa)
			require.NoError(t, err)
			direct, err := PodPatch([]byte(tc.pod), decoded, withPodLevel(decoded, desired), tc.vpa.Name)
			require.NoError(t, err)
			encoded, err := json.Marshal(direct)
			require.NoError(t, err)
			assert.JSONEq(t, string(encoded), string(resp.Patch))
		})
	}
}

// Without a recommendation that changes anything, nothing is patched, the
// pod-level values neither.
func TestMutatePodsWithPodLevelResourcesUnchanged(t *testing.T) {
	vpa := testvpa.New("web").InPlace().Recommend("app", "100m", "100Mi").Obj()
	pod := withPodLevelJSON(podJSON("", appContainer), `{"requests":{"cpu":"200m","memory":"200Mi"},"limits":{"cpu":"400m","memory":"400Mi"}}`)
	h, _ := testHandler{gate: true, vpas: []*vpatypes.VerticalPodAutoscaler{vpa}}.build(t)
	resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", pod)))
	require.True(t, resp.Allowed)
	assert.Empty(t, resp.Patch)
}

// The pod-level values are decoded the same way by both decoders, and
// bounded as container values are.
func TestDecodePodLevelResources(t *testing.T) {
	raw := withPodLevelJSON(podJSON("", appContainer), `{"requests":{"cpu":"200m","memory":"200Mi"},"limits":{"cpu":"400m"}}`)
	fast, fastShape, ok := decodePodFast([]byte(raw), "default")
	require.True(t, ok)
	ref, refShape, err := decodePodReference([]byte(raw), "default")
	require.NoError(t, err)
	assert.Equal(t, ref, fast)
	assert.Equal(t, refShape, fastShape)
	require.NotNil(t, fast.Spec.Resources)
	assert.Equal(t, containerShape{resources: true, requests: true, limits: true}, fastShape.podLevel)
	cpu := fast.Spec.Resources.Limits[corev1.ResourceCPU]
	assert.Equal(t, "400m", cpu.String())

	// A quantity past pkg/quantity's bound is refused before it is parsed.
	huge := withPodLevelJSON(podJSON("", appContainer), `{"requests":{"cpu":"`+strings.Repeat("9", 200)+`"}}`)
	_, _, err = decodePod([]byte(huge), "default")
	assert.Error(t, err)
}
