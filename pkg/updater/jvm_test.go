package updater

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/jvm"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// brokerPod is a running broker p of VPA web: 500m and 1Gi requested, a
// memory limit of 2Gi, and env.
func brokerPod(name string, env ...corev1.EnvVar) *corev1.Pod {
	p := testpod.New(name).Container("c", "500m", "1Gi").Limits("c", "", "2Gi").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().Obj()
	p.Spec.Containers[0].Env = env
	return p
}

// jvmVPA recommends 400Mi for c (the limit follows, at 800Mi), with the
// JVM annotation when value is set.
func jvmVPA(name, value string) *vpatypes.VerticalPodAutoscaler {
	v := testvpa.New(name).Target("apps/v1", "Deployment", name).InPlace().Recommend("c", "500m", "400Mi").Obj()
	if value != "" {
		v.Annotations = map[string]string{jvm.Annotation: value}
	}
	return v
}

var kafkaHeapOpts = corev1.EnvVar{Name: "KAFKA_HEAP_OPTS", Value: "-Xms1g -Xmx1g"}

func TestJVMMemoryIsLoweredOnlyToItsHeapFloorAndReportedOnce(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{brokerPod("p", kafkaHeapOpts)}, []*vpatypes.VerticalPodAutoscaler{jvmVPA("web", "")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"400Mi"},"limits":{"memory":"1690Mi"}}}]}}`, f.resizePatches()[0],
		"the limit recommended (800Mi) is under heap 1Gi + 512Mi + 15%: kept at 1690Mi, the request goes")
	events := f.events()
	require.Len(t, events, 2)
	assert.Contains(t, events[0], "Normal "+report.EventResizeSent+" Resizing in place to c: requests cpu=500m memory=400Mi limits memory=1690Mi")
	assert.Contains(t, events[1], "Normal "+report.EventJVMHeapFloor+" Memory of a JVM kept at its heap floor: container c: memory limit 1690Mi instead of 800Mi (JVM heap floor 1690Mi: heap 1Gi (-Xmx1g in KAFKA_HEAP_OPTS) + overhead 512Mi+15%); the rest of the resize is sent")
	vpaEvents := f.vpaEvents()
	require.Len(t, vpaEvents, 1)
	assert.Contains(t, vpaEvents[0], "VerticalPodAutoscaler/web Normal "+report.EventJVMHeapFloor+" Pod p: memory of a JVM kept at its heap floor")
	assert.InDelta(t, 1, counter(t, f, report.MetricJVMMemoryFloored, "reason", report.JVMHeapFloor), 0)

	// The kubelet applies it: nothing more is sent, nor reported again;
	// the condition says why the pod keeps more than recommended.
	f.waitSpecCached("1690Mi")
	f.kubelet(actuate)
	for range 3 {
		require.NoError(t, f.sync("p"))
	}
	assert.Len(t, f.resizePatches(), 1)
	assert.Empty(t, f.events(), "reported once per recommendation")
	assert.Empty(t, f.vpaEvents())
	assert.InDelta(t, 1, counter(t, f, report.MetricJVMMemoryFloored, "reason", report.JVMHeapFloor), 0)
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Equal(t, condition.ReasonJVMHeapFloor, c.Reason)
	assert.Contains(t, c.Message, "1 pod: 1 at a JVM's heap floor.")
	assert.Contains(t, c.Message, "JVM heap floor: p runs with more memory than recommended, at its heap floor: container c: memory limit 1690Mi instead of 800Mi")

	// A new recommendation is a new report.
	v := f.getVPA("web")
	v.Status.Recommendation = jvmVPA("web", "").Status.Recommendation
	v.Status.Recommendation.ContainerRecommendations[0].Target[corev1.ResourceMemory] = resource.MustParse("300Mi")
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").UpdateStatus(f.ctx, v, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool {
		return v.Status.Recommendation.ContainerRecommendations[0].Target.Memory().String() == "300Mi"
	})
	require.NoError(t, f.sync("p"))
	assert.Len(t, filter(f.events(), report.EventJVMHeapFloor), 1)
	assert.InDelta(t, 2, counter(t, f, report.MetricJVMMemoryFloored, "reason", report.JVMHeapFloor), 0)
}

func TestDeclaredJVMOfUnknownHeapIsNeverLoweredInMemory(t *testing.T) {
	pod := brokerPod("p")
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kafka-env"}}}}
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{jvmVPA("web", "c")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"400Mi"},"limits":{"memory":"2Gi"}}}]}}`, f.resizePatches()[0])
	events := f.events()
	require.Len(t, events, 2)
	assert.Contains(t, events[1], "Warning "+report.EventJVMHeapUnknown+" Memory of a JVM not lowered in place: container c: memory limit 2Gi instead of 800Mi")
	assert.Contains(t, events[1], "envFrom")
	assert.InDelta(t, 1, counter(t, f, report.MetricJVMMemoryFloored, "reason", report.JVMHeapUnknown), 0)
	f.waitPodMemory("p", "400Mi")
	f.kubelet(actuate)
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonJVMHeapUnknown, c.Reason)
	assert.Contains(t, c.Message, "JVM heap unknown: p runs with more memory than recommended, not lowered in place")
	assert.Contains(t, c.Message, "envFrom")
}

// A JVM annotation that cannot be read keeps its own VPA's memory where it
// is, says so, and leaves every other VPA alone.
func TestMalformedJVMAnnotationBlocksNoOtherVPA(t *testing.T) {
	other := brokerPod("q")
	other.Labels = map[string]string{"app": "other"}
	f := newFixture(t, []*corev1.Pod{brokerPod("p"), other},
		[]*vpatypes.VerticalPodAutoscaler{jvmVPA("web", "c heap=lots; c"), jvmVPA("other", "")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.sync("q"))
	require.Len(t, f.resizePatches(), 2)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"400Mi"},"limits":{"memory":"2Gi"}}}]}}`, f.resizePatches()[0],
		"its memory limit kept, the rest sent")
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"400Mi"},"limits":{"memory":"800Mi"}}}]}}`, f.resizePatches()[1],
		"the other VPA's pod is resized as recommended")
	vpaEvents := f.vpaEvents()
	var warned []string
	for _, e := range vpaEvents {
		if assert.NotContains(t, e, "VerticalPodAutoscaler/other") && strings.Contains(e, report.EventJVMAnnotationInvalid) {
			warned = append(warned, e)
		}
	}
	require.Len(t, warned, 1, "warned once: %v", vpaEvents)
	assert.Contains(t, warned[0], "VerticalPodAutoscaler/web Warning "+report.EventJVMAnnotationInvalid+" Annotation not read: vpa-inplace.dev/jvm entry")
	f.waitPodMemory("p", "400Mi")
	f.kubelet(actuate)
	require.NoError(t, f.sync("p"))
	assert.Empty(t, filter(f.vpaEvents(), report.EventJVMAnnotationInvalid), "not warned again for the same value")
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonJVMHeapUnknown, c.Reason)
	assert.Contains(t, c.Message, "Annotation not read: vpa-inplace.dev/jvm entry")
	assert.Contains(t, c.Message, "cannot be read")
	require.NoError(t, f.syncStatus("other"))
	assert.NotContains(t, f.condition("other").Message, "Annotation not read")
}

func filter(events []string, reason string) []string {
	var out []string
	for _, e := range events {
		if strings.Contains(e, reason) {
			out = append(out, e)
		}
	}
	return out
}

// The memory limit a JVM started with is kept in the pod's records, from
// the first sight of each start, and decides its heap's floor.
func TestLimitAtStartIsRecordedAtEachStart(t *testing.T) {
	pod := brokerPod("p", corev1.EnvVar{Name: "STRIMZI_DYNAMIC_HEAP_PERCENTAGE", Value: "50"})
	pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("4Gi")
	pod.Status.ContainerStatuses[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("4Gi")
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{jvmVPA("web", "")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	r, ok := f.ctrl.jvmStore.GetFor(webOwner, "uid-p")
	require.True(t, ok, "the start is recorded")
	limit, restarts, ok := r.ContainerStart("c")
	require.True(t, ok)
	assert.Equal(t, "4Gi", limit.String())
	assert.Equal(t, int32(0), restarts)
	require.Len(t, f.resizePatches(), 1)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"400Mi"},"limits":{"memory":"2868Mi"}}}]}}`, f.resizePatches()[0],
		"50% of 4Gi is 2Gi of heap: floor 2868Mi")

	// Lowered in place: the heap stays what it was, and so does the floor.
	f.waitSpecCached("2868Mi")
	f.kubelet(actuate)
	require.NoError(t, f.sync("p"))
	r, _ = f.ctrl.jvmStore.GetFor(webOwner, "uid-p")
	limit, _, _ = r.ContainerStart("c")
	assert.Equal(t, "4Gi", limit.String(), "a resize in place is no start")
	assert.Len(t, f.resizePatches(), 1)

	// The container restarts with 2868Mi: a new start, recorded with the
	// limit it started with. (A restart after a decrease is harm to the
	// watch after the resize, which sends the pod back where it was.)
	f.kubelet(func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 1 })
	require.NoError(t, f.sync("p"))
	r, _ = f.ctrl.jvmStore.GetFor(webOwner, "uid-p")
	limit, restarts, _ = r.ContainerStart("c")
	assert.Equal(t, "2868Mi", limit.String())
	assert.Equal(t, int32(1), restarts)

	// The pod goes: so does its record.
	require.NoError(t, f.kube.CoreV1().Pods("default").Delete(f.ctx, "p", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { _, ok := f.ctrl.jvmStore.Get("uid-p"); return !ok }, waitFor, 10*time.Millisecond)
}
