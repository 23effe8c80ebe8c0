package recommendation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

type fixedLimitRange struct{ container *corev1.LimitRangeItem }

func (f fixedLimitRange) GetContainerLimitRangeItem(string) (*corev1.LimitRangeItem, error) {
	return f.container, nil
}
func (fixedLimitRange) GetPodLimitRangeItem(string) (*corev1.LimitRangeItem, error) { return nil, nil }

func q(s string) resource.Quantity { return resource.MustParse(s) }

func TestForPod(t *testing.T) {
	calc := NewCalculator(limitrange.NewNoopLimitsCalculator())

	t.Run("no recommendation yet", func(t *testing.T) {
		d, err := calc.ForPod(testpod.New("p").Container("c", "100m", "100Mi").Obj(), testvpa.New("v").InPlace().Obj())
		require.NoError(t, err)
		assert.Empty(t, d)
	})

	t.Run("requests follow the target, limits scale in proportion", func(t *testing.T) {
		pod := testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Obj()
		vpa := testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		require.Contains(t, d, "c")
		assert.True(t, q("300m").Equal(d["c"].Requests[corev1.ResourceCPU]))
		assert.True(t, q("600m").Equal(d["c"].Limits[corev1.ResourceCPU]))
		assert.True(t, q("600Mi").Equal(d["c"].Limits[corev1.ResourceMemory]))
	})

	t.Run("maxAllowed caps the target and the bounds", func(t *testing.T) {
		pod := testpod.New("p").Container("c", "100m", "100Mi").Obj()
		vpa := testvpa.New("v").InPlace().Recommend("c", "8", "100Mi").MaxAllowed("c", "4", "").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		assert.True(t, q("4").Equal(d["c"].Requests[corev1.ResourceCPU]), "got %v", d["c"].Requests)
		assert.True(t, q("4").Equal(d["c"].UpperBound[corev1.ResourceCPU]))
	})

	t.Run("controlledValues RequestsOnly leaves limits alone", func(t *testing.T) {
		pod := testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "1", "1Gi").Obj()
		vpa := testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi").RequestsOnly("c").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		assert.Empty(t, d["c"].Limits)
	})

	t.Run("containers without a recommendation are absent", func(t *testing.T) {
		pod := testpod.New("p").Container("c", "100m", "100Mi").Container("other", "1", "1Gi").Obj()
		vpa := testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		assert.NotContains(t, d, "other")
	})

	t.Run("LimitRange max caps the proportional limit", func(t *testing.T) {
		lr := fixedLimitRange{container: &corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: q("500m")}}}
		calc := NewCalculator(lr)
		pod := testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "").Obj()
		vpa := testvpa.New("v").InPlace().Recommend("c", "400m", "100Mi").Obj()
		d, err := calc.ForPod(pod, vpa)
		require.NoError(t, err)
		lim := d["c"].Limits[corev1.ResourceCPU]
		assert.LessOrEqual(t, lim.MilliValue(), int64(500))
	})

	t.Run("nil inputs are an error, not a panic", func(t *testing.T) {
		_, err := calc.ForPod(nil, nil)
		assert.Error(t, err)
	})
}
