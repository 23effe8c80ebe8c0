package boost

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/annotations"

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
