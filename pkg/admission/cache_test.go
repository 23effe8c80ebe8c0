package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

func TestCacheTransformDropsWhatTheWebhookNeverReads(t *testing.T) {
	vpa := testvpa.New("web").InPlace().RecommendRange("app", "300m", "300Mi", "100m", "100Mi", "1", "1Gi").Obj()
	vpa.Status.Conditions = []vpatypes.VerticalPodAutoscalerCondition{{Type: vpatypes.RecommendationProvided, Status: corev1.ConditionTrue}}
	vpa.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "recommender"}}
	out, err := CacheTransform(vpa)
	require.NoError(t, err)
	got := out.(*vpatypes.VerticalPodAutoscaler)
	assert.Equal(t, []vpatypes.RecommendedContainerResources{{ContainerName: "app", Target: testpod.List("300m", "300Mi")}},
		got.Status.Recommendation.ContainerRecommendations)
	assert.Nil(t, got.Status.Conditions)
	assert.Nil(t, got.ManagedFields, "and what cachetrim drops")
	assert.Equal(t, vpa.Spec, got.Spec)

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"a": "b"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}}}
	out, err = CacheTransform(dep)
	require.NoError(t, err)
	trimmed := out.(*appsv1.Deployment)
	assert.Equal(t, corev1.PodTemplateSpec{}, trimmed.Spec.Template)
	assert.Equal(t, labels, trimmed.Spec.Selector.MatchLabels, "the selector is what target resolution reads")

	tombstone := cache.DeletedFinalStateUnknown{Key: "default/web", Obj: vpa}
	out, err = CacheTransform(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, out)
}

// podLimits is a LimitRange of both kinds: per container and per pod (the
// pod's caps the containers' targets in proportion, and reads their
// bounds).
type podLimits struct{ container, pod *corev1.LimitRangeItem }

func (l podLimits) GetContainerLimitRangeItem(string) (*corev1.LimitRangeItem, error) {
	return l.container, nil
}
func (l podLimits) GetPodLimitRangeItem(string) (*corev1.LimitRangeItem, error) { return l.pod, nil }

// The webhook gives a new pod the same resources from a VPA as cached by
// the admission controller as from the VPA whole.
func TestCacheTransformKeepsThePatch(t *testing.T) {
	list := testpod.List
	vpas := map[string]*vpatypes.VerticalPodAutoscaler{
		"bounds around the target": testvpa.New("web").InPlace().RecommendRange("app", "300m", "300Mi", "100m", "100Mi", "1", "1Gi").Obj(),
		"requests only, capped":    testvpa.New("web").InPlace().RecommendRange("app", "300m", "300Mi", "250m", "250Mi", "2", "2Gi").RequestsOnly("app").MaxAllowed("app", "280m", "").Obj(),
		"target above the bounds":  testvpa.New("web").InPlace().RecommendRange("app", "3", "3Gi", "1", "1Gi", "2", "2Gi").Obj(),
	}
	limits := map[string]podLimits{
		"no LimitRange":        {},
		"container LimitRange": {container: &corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: list("400m", "")}},
		"pod LimitRange":       {pod: &corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: list("250m", "250Mi")}},
	}
	pod := podJSON("", appContainer)
	for vpaName, vpa := range vpas {
		for limitsName, l := range limits {
			t.Run(vpaName+", "+limitsName, func(t *testing.T) {
				cached, err := CacheTransform(vpa.DeepCopy())
				require.NoError(t, err)
				var patches [2][]byte
				for i, v := range []*vpatypes.VerticalPodAutoscaler{vpa, cached.(*vpatypes.VerticalPodAutoscaler)} {
					h, _ := testHandler{vpas: []*vpatypes.VerticalPodAutoscaler{v}, recommender: recommendation.NewCalculator(l)}.build(t)
					patches[i] = response(t, post(t, h, MutatePodsPath, podReview("CREATE", pod))).Patch
				}
				require.NotEmpty(t, patches[0])
				assert.Equal(t, string(patches[0]), string(patches[1]))
			})
		}
	}
}
