package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/jvm"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// kafkaContainer is a broker "app" with an explicit heap of 1Gi (a floor
// of 1690Mi), requests 500m/1Gi and limits 1/2Gi, and extra fields.
func kafkaContainer(extra string) string {
	return `[{"name":"app","image":"quay.io/strimzi/kafka:0.48.0-kafka-4.1.0",` + extra +
		`"resources":{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"cpu":"1","memory":"2Gi"}}}]`
}

// A new pod of a JVM never gets a memory limit under its explicit heap +
// overhead from the recommendation: raised to the floor, and said so.
func TestNewJVMPodsGetAtLeastTheirHeapFloor(t *testing.T) {
	list := testpod.List
	web := func(cpu, mem string, annotations map[string]string) *vpatypes.VerticalPodAutoscaler {
		v := testvpa.New("web").InPlace().Recommend("app", cpu, mem).Obj()
		v.Annotations = annotations
		return v
	}
	const heapOpts = `"env":[{"name":"KAFKA_HEAP_OPTS","value":"-Xms1g -Xmx1g"}],`
	tests := []struct {
		name      string
		vpa       *vpatypes.VerticalPodAutoscaler
		container string
		want      corev1.ResourceRequirements
		wantAnn   string
	}{
		{
			name:      "a limit recommended under the floor is raised to it; the request is the recommendation's",
			vpa:       web("300m", "400Mi", nil),
			container: kafkaContainer(heapOpts),
			want:      requirements(list("300m", "400Mi"), list("600m", "1690Mi")),
			wantAnn:   "container app: memory limit 1690Mi instead of 800Mi (heap 1Gi, -Xmx1g in KAFKA_HEAP_OPTS, + overhead 512Mi+15%)",
		},
		{
			name:      "above the floor: the recommendation",
			vpa:       web("300m", "1Gi", nil),
			container: kafkaContainer(heapOpts),
			want:      requirements(list("300m", "1Gi"), list("600m", "2Gi")),
		},
		{
			name: "a Guaranteed JVM: request and limit raised together",
			vpa:  web("1", "800Mi", nil),
			container: `[{"name":"app",` + heapOpts +
				`"resources":{"requests":{"cpu":"1","memory":"2Gi"},"limits":{"cpu":"1","memory":"2Gi"}}}]`,
			want:    requirements(list("1", "1690Mi"), list("1", "1690Mi")),
			wantAnn: "container app: memory limit 1690Mi instead of 800Mi, memory request 1690Mi instead of 800Mi (heap 1Gi, -Xmx1g in KAFKA_HEAP_OPTS, + overhead 512Mi+15%)",
		},
		{
			name:      "an -Xmx on the command line, and the VPA's overhead",
			vpa:       web("300m", "400Mi", map[string]string{jvm.Annotation: "app overhead=256Mi"}),
			container: kafkaContainer(`"command":["java","-Xmx1g","-jar","app.jar"],`),
			want:      requirements(list("300m", "400Mi"), list("600m", "1280Mi")),
			wantAnn:   "container app: memory limit 1280Mi instead of 800Mi (heap 1Gi, -Xmx1g in the command line, + overhead 256Mi)",
		},
		{
			name:      "a heap the VPA declares",
			vpa:       web("300m", "400Mi", map[string]string{jvm.Annotation: "app heap=1Gi"}),
			container: kafkaContainer(""),
			want:      requirements(list("300m", "400Mi"), list("600m", "1690Mi")),
			wantAnn:   "container app: memory limit 1690Mi instead of 800Mi (heap 1Gi, as the VPA's vpa-inplace.dev/jvm annotation declares, + overhead 512Mi+15%)",
		},
		{
			name:      "a heap sized from the limit starts from the limit given: the recommendation",
			vpa:       web("300m", "400Mi", nil),
			container: kafkaContainer(`"env":[{"name":"JAVA_TOOL_OPTIONS","value":"-XX:MaxRAMPercentage=50"}],`),
			want:      requirements(list("300m", "400Mi"), list("600m", "800Mi")),
		},
		{
			name:      "a heap set from a ConfigMap is unknown here: the recommendation",
			vpa:       web("300m", "400Mi", nil),
			container: kafkaContainer(`"env":[{"name":"KAFKA_HEAP_OPTS","valueFrom":{"configMapKeyRef":{"name":"heap","key":"opts"}}}],`),
			want:      requirements(list("300m", "400Mi"), list("600m", "800Mi")),
		},
		{
			name:      "an annotation that cannot be read: what the spec states still holds",
			vpa:       web("300m", "400Mi", map[string]string{jvm.Annotation: "app heap=lots"}),
			container: kafkaContainer(heapOpts),
			want:      requirements(list("300m", "400Mi"), list("600m", "1690Mi")),
			wantAnn:   "container app: memory limit 1690Mi instead of 800Mi (heap 1Gi, -Xmx1g in KAFKA_HEAP_OPTS, + overhead 512Mi+15%)",
		},
		{
			name:      "no JVM: the recommendation",
			vpa:       web("300m", "400Mi", nil),
			container: kafkaContainer(`"env":[{"name":"MODE","value":"prod"}],`),
			want:      requirements(list("300m", "400Mi"), list("600m", "800Mi")),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := testHandler{vpas: []*vpatypes.VerticalPodAutoscaler{tc.vpa}}.build(t)
			pod := podJSON("", tc.container)
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", pod)))
			require.True(t, resp.Allowed)
			got := applyPatch(t, pod, resp)
			assertResources(t, tc.want, got.Spec.Containers[0].Resources, "app")
			assert.Equal(t, tc.wantAnn, got.Annotations[JVMFloorAnnotation])
			// The reference decoder gives the same answer.
			_, shape, err := decodePodReference([]byte(pod), "default")
			require.NoError(t, err)
			_, fastShape, ok := decodePodFast([]byte(pod), "default")
			require.True(t, ok)
			assert.Equal(t, shape.containers[0].spec, fastShape.containers[0].spec)
		})
	}
}

// A hostile env (a value the JSON cannot be decoded as) raises nothing and
// fails nothing.
func TestNewJVMPodsWithUndecodableSpecsGetTheRecommendation(t *testing.T) {
	vpa := testvpa.New("web").InPlace().Recommend("app", "300m", "400Mi").Obj()
	h, _ := testHandler{vpas: []*vpatypes.VerticalPodAutoscaler{vpa}}.build(t)
	pod := podJSON("", kafkaContainer(`"env":[{"name":"KAFKA_HEAP_OPTS","value":7}],`))
	resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", pod)))
	require.True(t, resp.Allowed)
	// (The pod cannot be decoded as a corev1.Pod: the patch is read as it is.)
	assert.Contains(t, string(resp.Patch), `"value":"800Mi"`)
	assert.NotContains(t, string(resp.Patch), JVMFloorAnnotation)
}
