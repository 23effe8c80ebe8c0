package boost

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

func factor(f int32, seconds int32) *vpatypes.StartupBoost {
	return &vpatypes.StartupBoost{CPU: &vpatypes.GenericStartupBoost{Type: vpatypes.FactorStartupBoostType, Factor: ptr.To(f), DurationSeconds: ptr.To(seconds)}}
}

func quantityBoost(q string) *vpatypes.StartupBoost {
	v := resource.MustParse(q)
	return &vpatypes.StartupBoost{CPU: &vpatypes.GenericStartupBoost{Type: vpatypes.QuantityStartupBoostType, Quantity: &v}}
}

func podBoost(b *vpatypes.StartupBoost) *testvpa.Builder {
	v := testvpa.New("web").InPlace()
	v.Obj().Spec.StartupBoost = b
	return v
}

func containerBoost(v *testvpa.Builder, container string, b *vpatypes.StartupBoost) *testvpa.Builder {
	return v.ContainerPolicy(vpatypes.ContainerResourcePolicy{ContainerName: container, StartupBoost: b})
}

func TestApply(t *testing.T) {
	tests := []struct {
		name              string
		vpa               *vpatypes.VerticalPodAutoscaler
		pod               *corev1.Pod
		requests, limits  corev1.ResourceList // the recommendation, processed
		wantReq, wantLim  corev1.ResourceList // nil: not boosted
		notBoostedContain string
	}{
		{"Factor on the recommendation", podBoost(factor(2, 20)).Obj(), testpod.New("p").Container("app", "100m", "100Mi").Obj(),
			testpod.List("300m", "200Mi"), nil, testpod.List("600m", "200Mi"), corev1.ResourceList{}, ""},
		{"Quantity on the recommendation", podBoost(quantityBoost("1500m")).Obj(), testpod.New("p").Container("app", "100m", "100Mi").Obj(),
			testpod.List("300m", "200Mi"), nil, testpod.List("1800m", "200Mi"), corev1.ResourceList{}, ""},
		{"no recommendation yet: the pod's own requests", podBoost(factor(3, 20)).Obj(), testpod.New("p").Container("app", "250m", "100Mi").Obj(),
			nil, nil, testpod.List("750m", "100Mi"), corev1.ResourceList{}, ""},
		{"the container policy wins over the VPA's", containerBoost(podBoost(factor(2, 20)), "app", factor(4, 60)).Obj(),
			testpod.New("p").Container("app", "100m", "100Mi").Obj(), testpod.List("100m", "100Mi"), nil, testpod.List("400m", "100Mi"), corev1.ResourceList{}, ""},
		{"a container policy alone boosts only its container", containerBoost(testvpa.New("web").InPlace(), "other", factor(4, 60)).Obj(),
			testpod.New("p").Container("app", "100m", "100Mi").Obj(), testpod.List("100m", "100Mi"), nil, nil, nil, ""},
		{"limits keep their ratio to requests", podBoost(factor(2, 20)).Obj(), testpod.New("p").Container("app", "100m", "100Mi").Limits("app", "300m", "").Obj(),
			testpod.List("200m", "100Mi"), testpod.List("600m", ""), testpod.List("400m", "100Mi"), testpod.List("1200m", ""), ""},
		{"a Guaranteed pod stays Guaranteed", podBoost(factor(2, 20)).Obj(), testpod.New("p").Guaranteed("app", "500m", "1Gi").Obj(),
			testpod.List("500m", "1Gi"), testpod.List("500m", "1Gi"), testpod.List("1", "1Gi"), testpod.List("1", "1Gi"), ""},
		{"capped at maxAllowed", podBoost(factor(4, 20)).MaxAllowed("app", "700m", "").Obj(), testpod.New("p").Container("app", "100m", "100Mi").Obj(),
			testpod.List("300m", "100Mi"), nil, testpod.List("700m", "100Mi"), corev1.ResourceList{}, ""},
		{"RequestsOnly stays 1m under the container's limit (its QoS class cannot change in place)",
			podBoost(factor(4, 20)).RequestsOnly("app").Obj(), testpod.New("p").Container("app", "100m", "100Mi").Limits("app", "300m", "").Obj(),
			testpod.List("100m", "100Mi"), nil, testpod.List("299m", "100Mi"), testpod.List("300m", ""), ""},
		{"RequestsOnly at its limit has no room", podBoost(factor(4, 20)).RequestsOnly("app").Obj(), testpod.New("p").Guaranteed("app", "300m", "100Mi").Obj(),
			testpod.List("300m", "100Mi"), nil, nil, nil, "no room"},
		{"a CPU resize that restarts the container is not boosted", podBoost(factor(2, 20)).Obj(),
			testpod.New("p").Container("app", "100m", "100Mi").ResizePolicy("app", corev1.ResourceCPU, corev1.RestartContainer).Obj(),
			testpod.List("100m", "100Mi"), nil, nil, nil, "RestartContainer"},
		{"no CPU request", podBoost(factor(2, 20)).Obj(), testpod.New("p").Container("app", "", "100Mi").Obj(),
			nil, nil, nil, nil, "no CPU request"},
		// A CPU limit of 0 holds the request at 0 (the API server refuses
		// a request above a limit): a boost would impose a limit.
		{"a CPU limit of 0, Quantity", podBoost(quantityBoost("500m")).Obj(), testpod.New("p").Container("app", "0", "100Mi").Limits("app", "0", "").Obj(),
			nil, nil, nil, nil, "CPU limit of 0"},
		{"a CPU limit of 0, Factor", podBoost(factor(2, 20)).Obj(), testpod.New("p").Container("app", "0", "100Mi").Limits("app", "0", "").Obj(),
			testpod.List("", "200Mi"), nil, nil, nil, "CPU limit of 0"},
		{"a factor beyond the bound", podBoost(factor(100000, 20)).Obj(), testpod.New("p").Container("app", "100m", "100Mi").Obj(),
			nil, nil, nil, nil, "between 1 and 100"},
		{"a quantity beyond any node", podBoost(quantityBoost("1e12")).Obj(), testpod.New("p").Container("app", "100m", "100Mi").Obj(),
			nil, nil, nil, nil, "between 0 and"},
		{"scaling mode Off", func() *vpatypes.VerticalPodAutoscaler {
			off := vpatypes.ContainerScalingModeOff
			return podBoost(factor(2, 20)).ContainerPolicy(vpatypes.ContainerResourcePolicy{ContainerName: "app", Mode: &off}).Obj()
		}(), testpod.New("p").Container("app", "100m", "100Mi").Obj(), nil, nil, nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &tt.pod.Spec.Containers[0]
			got := Apply(Input{VPA: tt.vpa, Container: c, Requests: tt.requests, Limits: tt.limits})
			if tt.wantReq == nil {
				assert.False(t, got.Boosted)
				if tt.notBoostedContain == "" {
					assert.Empty(t, got.NotBoosted)
				} else {
					assert.Contains(t, got.NotBoosted, tt.notBoostedContain)
				}
				return
			}
			require.True(t, got.Boosted, got.NotBoosted)
			assertList(t, tt.wantReq, got.Requests, "requests")
			assertList(t, tt.wantLim, got.Limits, "limits")
			// The annotation is upstream's: the container as created.
			var original struct{ Requests, Limits corev1.ResourceList }
			require.NoError(t, json.Unmarshal([]byte(got.Annotation), &original))
			assertList(t, cpuMemory(c.Resources.Requests), original.Requests, "annotation requests")
			assertList(t, cpuMemory(c.Resources.Limits), original.Limits, "annotation limits")
		})
	}
}

func TestApplyKeepsTheQoSClass(t *testing.T) {
	for _, pod := range []*corev1.Pod{
		testpod.New("p").Guaranteed("app", "500m", "1Gi").Obj(),
		testpod.New("p").Container("app", "100m", "100Mi").Limits("app", "300m", "200Mi").Obj(),
		testpod.New("p").Container("app", "100m", "100Mi").Obj(),
	} {
		for _, vpa := range []*vpatypes.VerticalPodAutoscaler{podBoost(factor(3, 20)).Obj(), podBoost(factor(3, 20)).RequestsOnly("app").Obj()} {
			c := pod.Spec.Containers[0]
			got := Apply(Input{VPA: vpa, Container: &c})
			if !got.Boosted {
				continue
			}
			boosted := pod.DeepCopy()
			boosted.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: got.Requests, Limits: got.Limits}
			if len(got.Limits) == 0 {
				boosted.Spec.Containers[0].Resources.Limits = nil
			}
			assert.Equal(t, testpod.QOS(pod), testpod.QOS(boosted), "%s with %v", pod.Spec.Containers[0].Resources, got)
		}
	}
}

func assertList(t *testing.T, want, got corev1.ResourceList, what string) {
	t.Helper()
	if len(want) == 0 && len(got) == 0 {
		return
	}
	require.Len(t, got, len(want), "%s: %v", what, got)
	for name, q := range want {
		g, ok := got[name]
		require.True(t, ok, "%s: no %s in %v", what, name, got)
		assert.Zero(t, q.Cmp(g), "%s %s: %s, want %s", what, name, g.String(), q.String())
	}
}
