package recommendation

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// countingCalculator counts the computations the memo asks for.
type countingCalculator struct {
	calc  *Calculator
	calls int
	err   error
}

func (c *countingCalculator) ForPod(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (Desired, error) {
	c.calls++
	if c.err != nil {
		return nil, c.err
	}
	return c.calc.ForPod(pod, vpa)
}

func newCounting(lr limitrange.LimitRangeCalculator) *countingCalculator {
	return &countingCalculator{calc: NewCalculator(lr)}
}

func versioned(b *testvpa.Builder, version string) *vpatypes.VerticalPodAutoscaler {
	vpa := b.Obj()
	vpa.ResourceVersion = version
	return vpa
}

func TestMemoComputesOncePerVPAVersionAndShape(t *testing.T) {
	calc := newCounting(limitrange.NewNoopLimitsCalculator())
	memo := NewMemo(calc, nil)
	vpa := versioned(testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi"), "10")
	shape := func(name string) *corev1.Pod {
		return testpod.New(name).Container("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Running().Obj()
	}

	first, err := memo.ForPod(shape("a"), vpa)
	require.NoError(t, err)
	second, err := memo.ForPod(shape("b"), vpa)
	require.NoError(t, err)
	assert.Equal(t, 1, calc.calls, "a second pod of the same shape is not computed again")
	assert.Equal(t, first, second)
	direct, err := NewCalculator(limitrange.NewNoopLimitsCalculator()).ForPod(shape("b"), vpa)
	require.NoError(t, err)
	assert.Equal(t, direct, second, "what is remembered is what the calculator computes")

	newer := versioned(testvpa.New("v").InPlace().Recommend("c", "400m", "400Mi"), "11")
	got, err := memo.ForPod(shape("a"), newer)
	require.NoError(t, err)
	assert.Equal(t, 2, calc.calls, "a new VPA version is computed")
	assert.True(t, q("400m").Equal(got["c"].Requests[corev1.ResourceCPU]), "got %v", got["c"].Requests)
	assert.Equal(t, 1, memo.Len())
}

func TestMemoShapes(t *testing.T) {
	vpa := versioned(testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi"), "10")
	for _, tc := range []struct {
		name string
		// other differs from the base pod in what it is named after.
		other *corev1.Pod
	}{
		{"cpu request", testpod.New("p").Container("c", "150m", "100Mi").Limits("c", "200m", "200Mi").Running().Obj()},
		{"memory request", testpod.New("p").Container("c", "100m", "150Mi").Limits("c", "200m", "200Mi").Running().Obj()},
		{"cpu limit", testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "300m", "200Mi").Running().Obj()},
		{"memory limit", testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "300Mi").Running().Obj()},
		{"no limits", testpod.New("p").Container("c", "100m", "100Mi").Running().Obj()},
		{"container name", testpod.New("p").Container("d", "100m", "100Mi").Limits("d", "200m", "200Mi").Running().Obj()},
		{"a second container", testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Container("d", "1", "1Gi").Running().Obj()},
		{"a sidecar", testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Sidecar("d", "10m", "10Mi").Running().Obj()},
		{"the container as a sidecar", testpod.New("p").Container("x", "", "").Sidecar("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Running().Obj()},
		{"resources the kubelet reports", func() *corev1.Pod {
			// Spec as the base pod; the kubelet still runs the container
			// with other limits (a resize under way).
			p := testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Running().Obj()
			p.Status.ContainerStatuses[0].Resources.Limits[corev1.ResourceCPU] = q("400m")
			return p
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calc := newCounting(limitrange.NewNoopLimitsCalculator())
			memo := NewMemo(calc, nil)
			base := testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Running().Obj()
			_, err := memo.ForPod(base, vpa)
			require.NoError(t, err)
			got, err := memo.ForPod(tc.other, vpa)
			require.NoError(t, err)
			assert.Equal(t, 2, calc.calls, "another shape is computed")
			want, err := NewCalculator(limitrange.NewNoopLimitsCalculator()).ForPod(tc.other, vpa)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// A pod is created by its tenant, and the admission webhook sees it
// before the API server validates its container names: a name holding the
// bytes that separate containers in the shape must not make a pod of
// another shape look like it, or what was computed for the one is given to
// the other.
func TestMemoShapesOfForgedNames(t *testing.T) {
	vpa := versioned(testvpa.New("v").InPlace().Recommend("a", "300m", "300Mi").Recommend("b", "300m", "300Mi"), "10")
	for _, tc := range []struct {
		name        string
		base, other *corev1.Pod
	}{
		{"two containers, or one named after both",
			testpod.New("p").Container("a", "", "").Container("b", "", "").Obj(),
			testpod.New("p").Container("a\x00\x00\x00\x00\x01b", "", "").Obj()},
		{"a sidecar, or a container named after one",
			testpod.New("p").Container("x", "", "").Sidecar("a", "", "").Obj(),
			testpod.New("p").Container("x", "", "").Container("\x02a", "", "").Obj()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calc := newCounting(limitrange.NewNoopLimitsCalculator())
			memo := NewMemo(calc, nil)
			_, err := memo.ForPod(tc.other, vpa)
			require.NoError(t, err)
			got, err := memo.ForPod(tc.base, vpa)
			require.NoError(t, err)
			assert.Equal(t, 2, calc.calls, "another shape is computed")
			assert.Contains(t, got, "a", "the pod gets what was computed for it")
		})
	}
}

func TestMemoKeepsTwoShapesPerVPA(t *testing.T) {
	calc := newCounting(limitrange.NewNoopLimitsCalculator())
	memo := NewMemo(calc, nil)
	vpa := versioned(testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi"), "10")
	pod := func(cpu string) *corev1.Pod { return testpod.New("p").Container("c", cpu, "100Mi").Running().Obj() }

	// Pods at the old and at the new values, alternately, as while a
	// workload is being resized.
	for range 3 {
		for _, cpu := range []string{"100m", "300m"} {
			_, err := memo.ForPod(pod(cpu), vpa)
			require.NoError(t, err)
		}
	}
	assert.Equal(t, 2, calc.calls)

	_, err := memo.ForPod(pod("200m"), vpa) // a third shape pushes out the oldest
	require.NoError(t, err)
	_, err = memo.ForPod(pod("300m"), vpa)
	require.NoError(t, err)
	assert.Equal(t, 3, calc.calls, "the most recent shapes are kept")
	_, err = memo.ForPod(pod("100m"), vpa)
	require.NoError(t, err)
	assert.Equal(t, 4, calc.calls, "the oldest shape was dropped")
}

func TestMemoLimitRangeChangesRecompute(t *testing.T) {
	var generation atomic.Uint64
	lr := &fixedLimitRange{}
	calc := newCounting(lr)
	memo := NewMemo(calc, generation.Load)
	vpa := versioned(testvpa.New("v").InPlace().Recommend("c", "400m", "100Mi"), "10")
	pod := testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "").Running().Obj()

	got, err := memo.ForPod(pod, vpa)
	require.NoError(t, err)
	assert.True(t, q("800m").Equal(got["c"].Limits[corev1.ResourceCPU]), "got %v", got["c"].Limits)

	lr.container = &corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: q("500m")}}
	generation.Add(1)
	got, err = memo.ForPod(pod, vpa)
	require.NoError(t, err)
	assert.Equal(t, 2, calc.calls)
	lim := got["c"].Limits[corev1.ResourceCPU]
	assert.LessOrEqual(t, lim.MilliValue(), int64(500), "the new LimitRange applies")
}

func TestMemoDoesNotRemember(t *testing.T) {
	pod := testpod.New("p").Container("c", "100m", "100Mi").Running().Obj()

	t.Run("errors", func(t *testing.T) {
		calc := newCounting(limitrange.NewNoopLimitsCalculator())
		calc.err = errors.New("boom")
		memo := NewMemo(calc, nil)
		vpa := versioned(testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi"), "10")
		for range 2 {
			_, err := memo.ForPod(pod, vpa)
			require.ErrorIs(t, err, calc.err)
		}
		assert.Equal(t, 2, calc.calls)
		assert.Zero(t, memo.Len())
	})

	t.Run("a VPA without a resourceVersion", func(t *testing.T) {
		calc := newCounting(limitrange.NewNoopLimitsCalculator())
		memo := NewMemo(calc, nil)
		vpa := testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi").Obj()
		for range 2 {
			_, err := memo.ForPod(pod, vpa)
			require.NoError(t, err)
		}
		assert.Equal(t, 2, calc.calls)
	})

	t.Run("nil inputs are an error, not a panic", func(t *testing.T) {
		memo := NewMemo(NewCalculator(limitrange.NewNoopLimitsCalculator()), nil)
		_, err := memo.ForPod(nil, nil)
		assert.Error(t, err)
	})
}

func TestMemoForget(t *testing.T) {
	calc := newCounting(limitrange.NewNoopLimitsCalculator())
	memo := NewMemo(calc, nil)
	pod := testpod.New("p").Container("c", "100m", "100Mi").Running().Obj()
	for i := range 3 {
		_, err := memo.ForPod(pod, versioned(testvpa.New(fmt.Sprint("v", i)).InPlace().Recommend("c", "300m", "300Mi"), "10"))
		require.NoError(t, err)
	}
	require.Equal(t, 3, memo.Len())
	memo.Forget("uid-v1")
	assert.Equal(t, 2, memo.Len())
	_, err := memo.ForPod(pod, versioned(testvpa.New("v1").InPlace().Recommend("c", "300m", "300Mi"), "10"))
	require.NoError(t, err)
	assert.Equal(t, 4, calc.calls, "a forgotten VPA is computed again")
}

// BenchmarkForPod compares a pass over pods of one shape with and without
// the memo.
func BenchmarkForPod(b *testing.B) {
	vpa := versioned(testvpa.New("v").InPlace().RecommendRange("c", "300m", "300Mi", "200m", "200Mi", "400m", "400Mi"), "10")
	pod := testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Running().Obj()
	for _, tc := range []struct {
		name string
		calc PodCalculator
	}{
		{"calculator", NewCalculator(limitrange.NewNoopLimitsCalculator())},
		{"memo", NewMemo(NewCalculator(limitrange.NewNoopLimitsCalculator()), nil)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.calc.ForPod(pod, vpa); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// What SharedAtPodLevel reads is part of the shape: the resources set at
// pod level, and which containers set their own in the spec (the kubelet's
// report of what a container runs with may hide that).
func TestMemoPodLevelShapes(t *testing.T) {
	vpa := versioned(testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi").Recommend("d", "300m", "300Mi"), "10")
	base := func() *testpod.Builder {
		return testpod.New("p").Container("c", "100m", "100Mi").Container("d", "", "100Mi")
	}
	sharing := base().PodLevel("1", "", "", "").Running().Obj()
	ownCPU := base().PodLevel("1", "", "", "").Running().Obj()
	ownCPU.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU] = q("50m")
	// The kubelet reports the same for d either way.
	ownCPU.Status.ContainerStatuses[1].Resources = sharing.Status.ContainerStatuses[1].Resources.DeepCopy()
	for _, tc := range []struct {
		name        string
		first, then *corev1.Pod
	}{
		{"pod-level resources set or not", base().Running().Obj(), sharing},
		{"a container setting its own cpu or sharing the pod's", sharing, ownCPU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calc := newCounting(limitrange.NewNoopLimitsCalculator())
			memo := NewMemo(calc, nil)
			_, err := memo.ForPod(tc.first, vpa)
			require.NoError(t, err)
			got, err := memo.ForPod(tc.then, vpa)
			require.NoError(t, err)
			want, err := NewCalculator(limitrange.NewNoopLimitsCalculator()).ForPod(tc.then, vpa)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// forgettingCalculator has its VPA deleted (Forget) while it computes: a
// worker that read the VPA from the cache just before its delete event.
type forgettingCalculator struct {
	memo  *Memo
	calc  PodCalculator
	calls int
}

func (c *forgettingCalculator) ForPod(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (Desired, error) {
	c.calls++
	c.memo.Forget(vpa.UID)
	return c.calc.ForPod(pod, vpa)
}

// A worker that read a VPA before its deletion and computes after Forget
// stores nothing: the deleted VPA's result would otherwise stay remembered
// for good. The VPAs forgotten are remembered as gone up to memoGone.
func TestMemoStoresNothingForAVPADeletedDuringItsComputation(t *testing.T) {
	calc := &forgettingCalculator{calc: NewCalculator(limitrange.NewNoopLimitsCalculator())}
	memo := NewMemo(calc, nil)
	calc.memo = memo
	pod := testpod.New("p").Container("c", "100m", "100Mi").Running().Obj()
	vpa := versioned(testvpa.New("v").InPlace().Recommend("c", "300m", "300Mi"), "10")
	desired, err := memo.ForPod(pod, vpa)
	require.NoError(t, err)
	assert.NotEmpty(t, desired, "the worker gets its answer")
	assert.Zero(t, memo.Len(), "nothing remembered for a deleted VPA")

	plain := NewMemo(NewCalculator(limitrange.NewNoopLimitsCalculator()), nil)
	plain.Forget(vpa.UID)
	for i := range memoGone {
		plain.Forget(types.UID(fmt.Sprint("other-", i)))
	}
	_, err = plain.ForPod(pod, vpa)
	require.NoError(t, err)
	assert.Equal(t, 1, plain.Len(), "a UID forgotten longer ago than memoGone others is no longer held as gone")
	assert.Len(t, plain.gone, memoGone)
}
