package boost

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/annotations"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func readyPod(since time.Time) *testpod.Builder {
	return testpod.New("p").Container("app", "200m", "100Mi").Container("side", "10m", "10Mi").Running().
		ConditionSince(corev1.PodReady, "", "", since)
}

func TestDueEndsEachBoostDurationAfterReady(t *testing.T) {
	vpa := containerBoost(podBoost(factor(2, 20)), "side", factor(2, 60)).Obj()
	pod := readyPod(t0).Annotation(AnnotationKey("app"), `{}`).Annotation(AnnotationKey("side"), `{}`).
		Annotation(AnnotationKey("gone"), `{}`).Obj()

	ended, next := Due(pod, vpa, t0.Add(19*time.Second))
	assert.Empty(t, ended)
	assert.Equal(t, time.Second, next, "the first boost ends 20 s after Ready")

	ended, next = Due(pod, vpa, t0.Add(20*time.Second))
	assert.Equal(t, []string{"app"}, ended, "exactly at Ready + durationSeconds")
	assert.Equal(t, 40*time.Second, next, "the container policy's 60 s")

	ended, next = Due(pod, vpa, t0.Add(time.Hour))
	assert.Equal(t, []string{"app", "side"}, ended, "an annotation naming no container is ignored")
	assert.Zero(t, next)
}

func TestDueKeepsTheBoostOfAPodNotReady(t *testing.T) {
	vpa := podBoost(factor(2, 20)).Obj()
	pod := testpod.New("p").Container("app", "200m", "100Mi").Running().Annotation(AnnotationKey("app"), `{}`).Obj()
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	ended, next := Due(pod, vpa, t0.Add(time.Hour))
	assert.Empty(t, ended)
	assert.Zero(t, next)
}

func TestDurationZeroEndsTheBoostAtReady(t *testing.T) {
	vpa := podBoost(factor(2, 0)).Obj()
	pod := readyPod(t0).Annotation(AnnotationKey("app"), `{}`).Obj()
	ended, _ := Due(pod, vpa, t0)
	assert.Equal(t, []string{"app"}, ended)
}

func TestOriginalReadsUpstreamsAnnotation(t *testing.T) {
	pod := testpod.New("p").Container("app", "200m", "100Mi").Limits("app", "400m", "200Mi").Obj()
	value, err := annotations.GetOriginalResourcesAnnotationValue(&pod.Spec.Containers[0])
	require.NoError(t, err)
	pod.Annotations = map[string]string{AnnotationKey("app"): value}
	requests, limits, ok, err := Original(pod, "app")
	require.NoError(t, err)
	require.True(t, ok)
	assertList(t, testpod.List("200m", "100Mi"), requests, "requests")
	assertList(t, testpod.List("400m", "200Mi"), limits, "limits")

	_, _, ok, err = Original(pod, "side")
	assert.False(t, ok)
	assert.NoError(t, err)
}

func TestOriginalRefusesHostileAnnotations(t *testing.T) {
	for name, value := range map[string]string{
		"a huge exponent":  `{"requests":{"cpu":"1e-99999999"}}`,
		"too long":         `{"requests":{"cpu":"1"},"x":"` + strings.Repeat("a", MaxAnnotationBytes) + `"}`,
		"not JSON":         `{`,
		"not a quantity":   `{"limits":{"memory":"lots"}}`,
		"too many digits":  `{"requests":{"cpu":"` + strings.Repeat("9", 40) + `"}}`,
		"a quantity array": `{"requests":{"cpu":["1"]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			pod := testpod.New("p").Container("app", "200m", "100Mi").Annotation(AnnotationKey("app"), value).Obj()
			_, _, ok, err := Original(pod, "app")
			assert.True(t, ok)
			assert.Error(t, err)
		})
	}
}

// annotated returns the boost annotation upstream writes for a container
// created with requests (and limits).
func annotated(t *testing.T, requests, limits corev1.ResourceList) string {
	t.Helper()
	value, err := annotations.GetOriginalResourcesAnnotationValue(&corev1.Container{Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}})
	require.NoError(t, err)
	return value
}

func TestEndDesired(t *testing.T) {
	// Both containers boosted 2x at creation: app from 200m (limit 400m),
	// side from 10m. A third container, plain, is never boosted.
	pod := testpod.New("p").Container("app", "400m", "100Mi").Limits("app", "800m", "200Mi").
		Container("side", "20m", "10Mi").Container("plain", "50m", "10Mi").
		Annotation(AnnotationKey("app"), annotated(t, testpod.List("200m", "100Mi"), testpod.List("400m", "200Mi"))).
		Annotation(AnnotationKey("side"), annotated(t, testpod.List("10m", "10Mi"), nil)).Obj()
	rec := recommendation.Desired{
		"app":   {Requests: testpod.List("250m", "120Mi"), Limits: testpod.List("500m", "240Mi")},
		"plain": {Requests: testpod.List("60m", "12Mi")},
	}

	t.Run("a container whose boost is over gets the recommendation; one still boosted is left out", func(t *testing.T) {
		out, errs := EndDesired(pod, rec, []string{"app"})
		assert.Empty(t, errs)
		assert.Equal(t, rec["app"], out["app"])
		assert.Equal(t, rec["plain"], out["plain"], "a container never boosted keeps its recommendation")
		assert.NotContains(t, out, "side", "still boosted: kept as it is")
	})

	t.Run("without a recommendation, the CPU recorded at creation", func(t *testing.T) {
		out, errs := EndDesired(pod, rec, []string{"app", "side"})
		assert.Empty(t, errs)
		require.Contains(t, out, "side")
		assertList(t, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}, out["side"].Requests, "side requests")
		assert.Empty(t, out["side"].Limits, "no CPU limit was recorded: the limits are left as they are")
	})

	t.Run("a recommendation without CPU gets the recorded CPU request and limit", func(t *testing.T) {
		memOnly := recommendation.Desired{"app": {Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("150Mi")}}}
		out, errs := EndDesired(pod, memOnly, []string{"app"})
		assert.Empty(t, errs)
		assertList(t, testpod.List("200m", "150Mi"), out["app"].Requests, "app requests")
		limit := out["app"].Limits[corev1.ResourceCPU]
		assert.Equal(t, "400m", limit.String())
	})

	t.Run("nothing known to lower to: left out, with the error", func(t *testing.T) {
		bad := pod.DeepCopy()
		bad.Annotations[AnnotationKey("side")] = `{"requests":{"cpu":"1e-99999999"}}`
		out, errs := EndDesired(bad, rec, []string{"app", "side"})
		require.Len(t, errs, 1)
		assert.Contains(t, errs[0].Error(), "container side")
		assert.NotContains(t, out, "side")

		bad.Annotations[AnnotationKey("side")] = `{"requests":{"memory":"10Mi"}}`
		_, errs = EndDesired(bad, rec, []string{"side"})
		require.Len(t, errs, 1)
		assert.Contains(t, errs[0].Error(), "no CPU request")
	})

	t.Run("the recommendation given is not changed", func(t *testing.T) {
		_, _ = EndDesired(pod, rec, nil)
		assert.Contains(t, rec, "app")
		assert.Len(t, rec, 2)
	})
}
