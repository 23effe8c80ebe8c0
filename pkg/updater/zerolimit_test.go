package updater

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// Limits of 0, per Kubernetes version: a container's limit of 0 holds its
// request at 0 (the API server refuses a request above a limit, on 1.38
// too), and one the kubelet reports for a limit the spec lacks is no
// limit. The resize sends the cpu the VPA asks and leaves the memory held,
// or sends the memory recommended.
func TestResizeAroundLimitsOfZero(t *testing.T) {
	for _, minor := range []int{37, 38} {
		for _, tc := range []struct {
			name string
			pod  *corev1.Pod
			want string
		}{
			{"a memory limit of 0 in the spec", testpod.New("p").Container("c", "100m", "0").Limits("c", "200m", "0").
				OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().Obj(),
				`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"0"},"limits":{"cpu":"600m","memory":"0"}}}]}}`},
			{"a memory limit of 0 reported for none", testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "").
				OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().ReportedLimits("c", "200m", "0").Obj(),
				`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"300Mi"},"limits":{"cpu":"600m"}}}]}}`},
		} {
			t.Run(fmt.Sprintf("%s/1.%d", tc.name, minor), func(t *testing.T) {
				f := newFixture(t, []*corev1.Pod{tc.pod}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("300m", "300Mi")}, fixtureOpts{serverMinor: minor})
				require.NoError(t, f.sync("p"))
				assert.Equal(t, []string{tc.want}, f.resizePatches())
			})
		}
	}
}
