//go:build e2e

package e2e

// Java and memory (docs/jvm.md): the memory of a JVM is lowered in place at
// most to its heap floor, heap + overhead; a raise that restarts it gives
// its heap the new limit. The hollow kubelet models the JVM
// (hack/cluster/cmd/hollow-node/jvm.go): it sizes its heap at its start
// from its options and its limit then, and is OOM-killed when its limit
// falls below heap + overhead. Its usage annotation sets the memory it
// reports (a broker at rest), under which the kubelet and the metrics API
// let a limit go down: what saves a JVM is its floor, or nothing.

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	// hollowJVMAnnotation gives the hollow kubelet the options of a JVM
	// that its image carries and the pod spec does not show.
	hollowJVMAnnotation = "hollow-node.vpa-inplace.dev/jvm"
	// hollowUsageAnnotation sets the memory a container reports.
	hollowUsageAnnotation = "hollow-node.vpa-inplace.dev/usage"
	eventJVMHeapFloor     = "InPlaceResizeJVMHeapFloor"
	eventResizeSent       = "InPlaceResizeSent"
	reasonJVMHeapFloor    = "JVMHeapFloor"
	metricJVMFloored      = "vpa_inplace_updater_jvm_memory_floored_total"
)

// atRest is a broker's memory at rest: its heap is not touched yet.
var atRest = map[string]string{hollowUsageAnnotation: "app=memory:400Mi"}

// broker is a single broker of 2Gi of memory (requested and limited) and
// 100m of CPU.
func broker(name string, annotations map[string]string, policy []corev1.ContainerResizePolicy) workload {
	return workload{name: name, requests: rl("100m", "2Gi"), limits: rl("", "2Gi"), annotation: annotations, policy: policy}
}

// deployWithEnv is deploy with env on the container.
func deployWithEnv(t *testing.T, ns string, w workload, vars ...corev1.EnvVar) []corev1.Pod {
	t.Helper()
	if w.node == "" {
		w.node = nodeFor(t)
	}
	w.replicas = max(w.replicas, 1)
	d := w.deployment(ns)
	d.Spec.Template.Spec.Containers[0].Env = vars
	_, err := kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	return waitRunning(t, ns, w)
}

func restarts(p *corev1.Pod) int32 { return p.Status.ContainerStatuses[0].RestartCount }

func lastTermination(p *corev1.Pod) string {
	if t := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; t != nil {
		return t.Reason
	}
	return ""
}

// requireRestarts watches the pod for settle and fails if it restarts
// beyond n, or goes.
func requireRestarts(t *testing.T, ns, pod string, uid types.UID, n int32) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		p := getPod(t, ns, pod)
		require.Equal(t, uid, p.UID, "the same pod")
		require.Equal(t, n, restarts(p), "restarts of %s (last termination %q)", pod, lastTermination(p))
		time.Sleep(500 * time.Millisecond)
	}
}

// limitAtStart reads the memory limit the jvm records of VPA ns/name hold
// for the pod, and the restart count of its start ("" when none).
func limitAtStart(t *testing.T, ns, name string, uid types.UID) (string, int32) {
	t.Helper()
	v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	cm, err := kube.CoreV1().ConfigMaps(recordsNamespace).Get(context.Background(), "vpa-inplace-records-jvm-"+string(v.UID), metav1.GetOptions{})
	if err != nil {
		return "", 0
	}
	var doc struct {
		Attempts []struct {
			Resources map[string]struct {
				Limits map[string]string `json:"limits"`
			} `json:"resources"`
			Starts map[string]int32 `json:"starts"`
			Pods   string           `json:"pods"`
		} `json:"attempts"`
	}
	require.NoError(t, json.Unmarshal([]byte(cm.Data["records"]), &doc))
	for _, a := range doc.Attempts {
		if strings.Contains(a.Pods, string(uid)+":") {
			return a.Resources["app"].Limits["memory"], a.Starts["app"]
		}
	}
	return "", 0
}

// (a) A Strimzi-shaped broker (KAFKA_HEAP_OPTS=-Xms1g -Xmx1g, a 2Gi limit)
// and a recommendation of 800Mi: lowered only to its floor, 1690Mi (1Gi +
// 512Mi + 15%), never OOM-killed; reported by an event, the VPA condition
// and the metric.
func TestJVMBrokerIsLoweredOnlyToItsHeapFloor(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deployWithEnv(t, ns, broker("broker", atRest, nil), corev1.EnvVar{Name: "KAFKA_HEAP_OPTS", Value: "-Xms1g -Xmx1g"})
	pod := pods[0]
	before := 0.0
	metrics := os.Getenv("E2E_UPDATER_METRICS") != ""
	if metrics {
		before = updaterMetric(t, metricJVMFloored)
	}
	newVPA(t, ns, "broker", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "broker", "100m", "800Mi")

	p := waitLimits(t, ns, pod.Name, "100m", "1690Mi", "1690Mi")
	assert.Equal(t, pod.UID, p.UID, "resized in place")
	waitEvent(t, ns, pod.Name, eventJVMHeapFloor, 1)
	c := waitCondition(t, ns, "broker", reasonJVMHeapFloor)
	assert.Contains(t, c.Message, "memory limit 1690Mi instead of 800Mi")
	assert.Contains(t, c.Message, "heap 1Gi (-Xmx1g in KAFKA_HEAP_OPTS) + overhead 512Mi+15%")
	requireRestarts(t, ns, pod.Name, pod.UID, 0)
	requireStable(t, ns, pod.Name)
	assert.Equal(t, int32(1), eventCount(t, ns, pod.Name, eventJVMHeapFloor), "reported once")
	if metrics {
		assert.GreaterOrEqual(t, updaterMetric(t, metricJVMFloored), before+1)
	}
}

// (b) A dynamic-heap broker (Strimzi's 50% of a 2Gi limit) whose memory
// restarts it (resizePolicy RestartContainer): lowered to the least limit
// whose own heap fits (1207Mi: 604Mi of heap + 512Mi + 15%), after one
// paced restart and no OOM kill; then raised to 2Gi, after one more
// restart, with the heap that follows (1Gi), the limit it started with
// recorded each time.
func TestDynamicHeapBrokerLoweredToItsFloorThenRaisedWithARestart(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	restart := []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	pods := deployWithEnv(t, ns, broker("broker", atRest, restart), corev1.EnvVar{Name: "STRIMZI_DYNAMIC_HEAP_PERCENTAGE", Value: "50"})
	pod := pods[0]
	newVPA(t, ns, "broker", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "broker", "100m", "800Mi")

	p := waitLimits(t, ns, pod.Name, "100m", "1207Mi", "1207Mi")
	assert.Equal(t, pod.UID, p.UID, "resized in place")
	waitFor(t, eventually, "one restart", func(context.Context) (bool, error) { return restarts(getPod(t, ns, pod.Name)) == 1, nil })
	waitEvent(t, ns, pod.Name, eventJVMHeapFloor, 1)
	requireRestarts(t, ns, pod.Name, pod.UID, 1)
	assert.NotEqual(t, "OOMKilled", lastTermination(getPod(t, ns, pod.Name)), "restarted by its resize, not killed")
	waitFor(t, eventually, "the limit it restarted with recorded", func(context.Context) (bool, error) {
		lim, n := limitAtStart(t, ns, "broker", pod.UID)
		return lim == "1207Mi" && n == 1, nil
	})

	recommend(t, ns, "broker", "100m", "2Gi")
	waitLimits(t, ns, pod.Name, "100m", "2Gi", "2Gi")
	waitFor(t, eventually, "one more restart", func(context.Context) (bool, error) { return restarts(getPod(t, ns, pod.Name)) == 2, nil })
	sent := events(t, ns, pod.Name, eventResizeSent)
	found := false
	for _, e := range sent {
		found = found || strings.Contains(e.Message, "heap 1Gi after the restart this resize causes")
	}
	assert.True(t, found, "the raise says what the heap becomes: %v", sent)
	waitFor(t, eventually, "the new limit at start recorded", func(context.Context) (bool, error) {
		lim, n := limitAtStart(t, ns, "broker", pod.UID)
		return lim == "2Gi" && n == 2, nil
	})
	requireRestarts(t, ns, pod.Name, pod.UID, 2)
}

// (c) The same broker as (a), whose heap only its image states (the spec
// shows no JVM), on a VPA that declares none: lowered to 800Mi, it is
// OOM-killed, and the safety model resizes it back in place. The floor of
// (a) would have kept 1690Mi; attune's rule would keep 2Gi (docs/jvm.md).
func TestUndeclaredJVMLoweredUnderItsHeapIsOOMKilledAndReverted(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	annotations := map[string]string{hollowJVMAnnotation: "app=-Xms1g -Xmx1g"}
	for k, v := range atRest {
		annotations[k] = v
	}
	pods := deployWithEnv(t, ns, broker("broker", annotations, nil))
	pod := pods[0]
	newVPA(t, ns, "broker", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "broker", "100m", "800Mi")

	waitEvent(t, ns, pod.Name, eventHarmed, 1)
	back := waitLimits(t, ns, pod.Name, "100m", "2Gi", "2Gi")
	assert.Equal(t, pod.UID, back.UID, "reverted in place: the same pod")
	assert.Positive(t, restarts(back), "OOM-killed under its heap")
	assert.Equal(t, "OOMKilled", lastTermination(back))
	waitEvent(t, ns, pod.Name, eventReverted, 1)
	assert.Zero(t, eventCount(t, ns, pod.Name, eventJVMHeapFloor), "no JVM known: no floor")
}
