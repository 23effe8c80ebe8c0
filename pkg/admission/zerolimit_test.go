package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testadmit"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// A new pod whose container sets a limit of 0 (no limit to the kubelet,
// and from Kubernetes 1.38 to its sandbox too) has a request of 0 of that
// resource, which the API server holds to it: a request above a limit is
// refused, a limit of 0 included. The pod keeps it, whatever the VPA
// controls, and is created; the other resource follows the recommendation.
func TestMutatePodsKeepsWhatAZeroLimitHolds(t *testing.T) {
	list := testpod.List
	// As the API server has it before the webhook: the memory request
	// defaulted to its limit of 0.
	pod := podJSON("", `[{"name":"app","resources":{"requests":{"cpu":"100m","memory":"0"},"limits":{"cpu":"200m","memory":"0"}}}]`)
	for _, tc := range []struct {
		name string
		vpa  *vpatypes.VerticalPodAutoscaler
		want map[string][2]string
	}{
		{"requests and limits", testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj(), map[string][2]string{"cpu": {"300m", "600m"}}},
		{"requests only", testvpa.New("web").InPlace().Recommend("app", "150m", "300Mi").RequestsOnly("app").Obj(), map[string][2]string{"cpu": {"150m", "200m"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := testHandler{gate: true, vpas: []*vpatypes.VerticalPodAutoscaler{tc.vpa}}.build(t)
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", pod)))
			require.True(t, resp.Allowed)
			got := applyPatch(t, pod, resp)
			assertResources(t, requirements(list(tc.want["cpu"][0], "0"), list(tc.want["cpu"][1], "0")), got.Spec.Containers[0].Resources, "app")
			assert.NoError(t, testadmit.Pod(got, nil, nil), "the API server creates it")
		})
	}
}
