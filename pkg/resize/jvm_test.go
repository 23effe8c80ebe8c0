package resize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/jvm"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// broker is a running pod whose container c requests 1Gi of memory, is
// limited at lim and has env.
func broker(lim string, env ...corev1.EnvVar) *testpod.Builder {
	b := testpod.New("p").Container("c", "500m", "1Gi").Limits("c", "", lim)
	b.Obj().Spec.Containers[0].Env = env
	return b
}

func envVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// kafkaHeap is Strimzi's explicit heap of a broker: 1Gi, a floor of 1690Mi.
var kafkaHeap = envVar("KAFKA_HEAP_OPTS", "-Xms1g -Xmx1g")

// withEnv sets env on the pod's container c (after Running, which copies
// nothing of it).
func withEnv(p *corev1.Pod, env ...corev1.EnvVar) *corev1.Pod {
	p.Spec.Containers[0].Env = env
	return p
}

func decideJVM(pod *corev1.Pod, desired recommendation.Desired, annotations map[string]string, limitAtStart map[string]int64) Decision {
	j := InspectJVMs(pod, annotations)
	if j != nil {
		j.LimitAtStart = limitAtStart
	}
	return Decide(Input{Pod: pod, Desired: desired, Threshold: 0.1, ServerMinor: 37, DisruptionAllowed: true, JVM: j})
}

func TestDecideJVMHeapFloor(t *testing.T) {
	gi2 := map[string]int64{"c": 2 * jvm.GiB}
	tests := []struct {
		name         string
		pod          *corev1.Pod
		desired      recommendation.Desired
		annotations  map[string]string
		limitAtStart map[string]int64

		action Action
		reason Reason
		patch  string
		// hints are parts of the decision's message.
		hints []string
		// floored: a container is kept at its floor.
		floored bool
	}{
		{
			name:    "explicit heap: a memory limit recommended under the floor is lowered to it, the rest goes",
			pod:     broker("2Gi", kafkaHeap).Running().Obj(),
			desired: desire("200m", "600Mi", "800Mi"),
			action:  ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"1690Mi"}}}]}}`,
			hints: []string{"memory limit 1690Mi instead of 800Mi", "JVM heap floor 1690Mi: heap 1Gi (-Xmx1g in KAFKA_HEAP_OPTS) + overhead 512Mi+15%"},
		},
		{
			name:    "a Guaranteed JVM: the request follows its limit to the floor, the QoS class stays",
			pod:     withEnv(testpod.New("p").Guaranteed("c", "1", "2Gi").Running().Obj(), kafkaHeap),
			desired: desireGuaranteed("1", "800Mi"),
			action:  ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1","memory":"1690Mi"},"limits":{"cpu":"1","memory":"1690Mi"}}}]}}`,
			hints: []string{"memory limit 1690Mi instead of 800Mi, memory request 1690Mi instead of 800Mi"},
		},
		{
			name:    "a JVM without a memory limit: its request binds, and keeps the floor",
			pod:     withEnv(testpod.New("p").Container("c", "500m", "2Gi").Running().Obj(), kafkaHeap),
			desired: desire("500m", "800Mi", ""),
			action:  ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"1690Mi"}}}]}}`,
			hints: []string{"memory request 1690Mi instead of 800Mi"},
		},
		{
			name:    "a recommendation above the floor is sent as it is",
			pod:     broker("2Gi", kafkaHeap).Running().Obj(),
			desired: desire("500m", "600Mi", "1800Mi"),
			action:  ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"600Mi"},"limits":{"memory":"1800Mi"}}}]}}`,
		},
		{
			name:    "a JVM already under its floor is not lowered further",
			pod:     broker("1500Mi", kafkaHeap).Running().Obj(),
			desired: desire("200m", "1Gi", "800Mi"),
			action:  ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"1Gi"},"limits":{"memory":"1500Mi"}}}]}}`,
			hints: []string{"memory limit 1500Mi instead of 800Mi"},
		},
		{
			name:    "only the memory of a JVM would change, under its floor, already there: nothing sent",
			pod:     withEnv(testpod.New("p").Guaranteed("c", "1", "1690Mi").Running().Obj(), kafkaHeap),
			desired: desireGuaranteed("1", "800Mi"),
			action:  ActionSkip, reason: ReasonJVMHeapFloor, floored: true,
			hints: []string{"nothing to resize but memory under a JVM's heap floor"},
		},
		{
			name: "a heap set from a ConfigMap is unknown: the memory is not lowered at all, the rest goes",
			pod: broker("2Gi", corev1.EnvVar{Name: "KAFKA_HEAP_OPTS", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "heap"}, Key: "opts"}}}).Running().Obj(),
			desired: desire("200m", "600Mi", "800Mi"),
			action:  ActionPatch, reason: ReasonJVMHeapUnknown, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"2Gi"}}}]}}`,
			hints: []string{"memory limit 2Gi instead of 800Mi", "not lowered in place while its heap is unknown", "KAFKA_HEAP_OPTS"},
		},
		{
			name:        "a JVM declared on the VPA with its heap: the floor of that heap",
			pod:         broker("2Gi").Running().Obj(),
			desired:     desire("200m", "600Mi", "800Mi"),
			annotations: map[string]string{jvm.Annotation: "c heap=1Gi"},
			action:      ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"1690Mi"}}}]}}`,
			hints: []string{"declares"},
		},
		{
			name: "a declared JVM whose heap comes from envFrom is never lowered in memory",
			pod: func() *corev1.Pod {
				p := broker("2Gi").Running().Obj()
				p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kafka-env"}}}}
				return p
			}(),
			desired:     desire("200m", "600Mi", "800Mi"),
			annotations: map[string]string{jvm.Annotation: "*"},
			action:      ActionPatch, reason: ReasonJVMHeapUnknown, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"2Gi"}}}]}}`,
			hints: []string{"envFrom"},
		},
		{
			name:        "an annotation that cannot be read: no container's memory is lowered, the rest goes",
			pod:         broker("2Gi").Running().Obj(),
			desired:     desire("200m", "600Mi", "800Mi"),
			annotations: map[string]string{jvm.Annotation: "c heap=lots"},
			action:      ActionPatch, reason: ReasonJVMHeapUnknown, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"2Gi"}}}]}}`,
			hints: []string{"cannot be read", "vpa-inplace.dev/jvm"},
		},
		{
			name:        "the VPA's overhead replaces the default",
			pod:         broker("2Gi", kafkaHeap).Running().Obj(),
			desired:     desire("200m", "600Mi", "800Mi"),
			annotations: map[string]string{jvm.Annotation: "c overhead=256Mi"},
			action:      ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"1280Mi"}}}]}}`,
			hints: []string{"overhead 256Mi"},
		},
		{
			name:         "a heap sized from the limit: the floor of the limit the container started with, not of today's",
			pod:          broker("3Gi", envVar("JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=50")).Running().Obj(),
			desired:      desire("200m", "600Mi", "800Mi"),
			limitAtStart: map[string]int64{"c": 4 * jvm.GiB},
			action:       ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			// 2Gi of heap (50% of 4Gi) + 512Mi + 15%: 2867.2Mi.
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"2868Mi"}}}]}}`,
			hints: []string{"heap 2Gi (50% of the memory limit at start, 4Gi; -XX:MaxRAMPercentage=50 in JAVA_TOOL_OPTIONS)"},
		},
		{
			name:    "a heap sized from the limit without a limit at start known: unknown, not lowered",
			pod:     broker("3Gi", envVar("JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=50")).Running().Obj(),
			desired: desire("200m", "600Mi", "800Mi"),
			action:  ActionPatch, reason: ReasonJVMHeapUnknown, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"3Gi"}}}]}}`,
		},
		{
			name:         "Strimzi's dynamic heap restarted with its new limit: the least limit whose own heap fits",
			pod:          broker("2Gi", envVar("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50")).ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj(),
			desired:      desire("500m", "600Mi", "800Mi"),
			limitAtStart: gi2,
			action:       ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"600Mi"},"limits":{"memory":"1207Mi"}}}]}}`,
			hints: []string{"JVM heap floor 1207Mi: the heap restarts at 604Mi (Strimzi's dynamic heap"},
		},
		{
			name:    "an explicit heap restarted with a new limit keeps its floor",
			pod:     broker("2Gi", kafkaHeap).ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj(),
			desired: desire("500m", "600Mi", "800Mi"),
			action:  ActionPatch, reason: ReasonJVMHeapFloor, floored: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"600Mi"},"limits":{"memory":"1690Mi"}}}]}}`,
		},
		{
			name:         "a raise in place: sent, and the heap stays until the container restarts",
			pod:          broker("2Gi", envVar("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50")).Running().Obj(),
			desired:      desire("500m", "2Gi", "4Gi"),
			limitAtStart: gi2,
			action:       ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"2Gi"},"limits":{"memory":"4Gi"}}}]}}`,
			hints: []string{"container c: heap stays 1Gi until the container restarts"},
		},
		{
			name:         "a raise that restarts the container: the heap follows the new limit",
			pod:          broker("2Gi", envVar("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50")).ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj(),
			desired:      desire("500m", "2Gi", "4Gi"),
			limitAtStart: gi2,
			action:       ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"2Gi"},"limits":{"memory":"4Gi"}}}]}}`,
			hints: []string{"container c: heap 2Gi after the restart this resize causes"},
		},
		{
			name:    "a container that is no JVM is lowered as recommended",
			pod:     broker("2Gi").Running().Obj(),
			desired: desire("200m", "600Mi", "800Mi"),
			action:  ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"800Mi"}}}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decideJVM(tt.pod, tt.desired, tt.annotations, tt.limitAtStart)
			assert.Equal(t, tt.action, d.Action, d.Message)
			assert.Equal(t, tt.reason, d.Reason, d.Message)
			if tt.patch != "" {
				require.NotNil(t, d.Patch)
				assert.JSONEq(t, tt.patch, string(d.Patch))
			} else {
				assert.Nil(t, d.Patch)
			}
			assert.Equal(t, tt.floored, len(d.Floored) > 0)
			for _, h := range tt.hints {
				assert.Contains(t, d.Message, h)
			}
		})
	}
}

// The usage rule applies to what the floor leaves: a floor above usage
// plus the margin goes.
func TestDecideJVMHeapFloorThenUsage(t *testing.T) {
	pod := broker("2Gi", kafkaHeap).Running().Obj()
	j := InspectJVMs(pod, nil)
	d := Decide(Input{Pod: pod, Desired: desire("200m", "600Mi", "800Mi"), Threshold: 0.1, ServerMinor: 37, DisruptionAllowed: true, JVM: j,
		MemoryUsage: usage("1500Mi"), MemoryLimitMargin: 0.2})
	assert.Equal(t, ReasonMemoryLimitKept, d.Reason, "1500Mi + 20% is above the floor: the running limit is kept")
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"2Gi"}}}]}}`, string(d.Patch))
	assert.Contains(t, d.Message, "JVM heap floor 1690Mi")

	d = Decide(Input{Pod: pod, Desired: desire("200m", "600Mi", "800Mi"), Threshold: 0.1, ServerMinor: 37, DisruptionAllowed: true, JVM: j,
		MemoryUsage: usage("400Mi"), MemoryLimitMargin: 0.2})
	assert.Equal(t, ReasonJVMHeapFloor, d.Reason, d.Message)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"600Mi"},"limits":{"memory":"1690Mi"}}}]}}`, string(d.Patch))
}

func TestInspectJVMsOfAPodWithoutJVMIsNil(t *testing.T) {
	assert.Nil(t, InspectJVMs(broker("2Gi").Running().Obj(), nil))
	assert.NotNil(t, InspectJVMs(broker("2Gi").Running().Obj(), map[string]string{jvm.Annotation: ";;"}), "an annotation naming nothing cannot be read")
}
