//go:build e2e

package e2e

// The watch after a resize (docs/safety-after-resize.md, sections 1 and 2):
// (a) the restart a restarting decrease causes, and the slow start after
// it, are no harm; (b) the watch of a single-pod VPA's decrease survives a
// restart of the updater, and an OOM kill after it is reverted in place and
// held. Both rely on the hollow node (hack/cluster/cmd/hollow-node): (a) on
// its exec probe "hollow-node-ready-after 90s" (ready.go), (b) on its kill
// annotation (kill.go). The VPAs set their own observation window: the
// suite's --resize-observation-window=20s is shorter than either scenario.

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// readyAfterCommand is the hollow node's exec probe that passes only once
// its container has run for the duration that follows.
const readyAfterCommand = "hollow-node-ready-after"

// (a) A memory decrease under resizePolicy RestartContainer of a pod whose
// readiness probe passes only 90 s after its container starts: the restart
// the resize causes, and the pod not Ready for 90 s after it, are no harm.
// The decrease is watched for its window (3 minutes, by annotation: longer
// than the start-up and --harm-not-ready-grace's 1 minute together) and not
// reverted.
func TestARestartingDecreaseOfASlowStarterIsNotReverted(t *testing.T) {
	parallel(t)
	const startup = 90 * time.Second
	ns := newNamespace(t, nil)
	w := workload{name: "jvm", replicas: 1, requests: rl("100m", "200Mi"), limits: rl("", "200Mi"), node: nodeFor(t),
		policy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}},
		readiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{readyAfterCommand, startup.String()}}},
			PeriodSeconds: 2, FailureThreshold: 1}}
	_, err := kube.AppsV1().Deployments(ns).Create(ctxFor(t), w.deployment(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	var pod corev1.Pod
	waitFor(t, startup+eventually, "the pod Ready once its probe passes", func(context.Context) (bool, error) {
		pods := podsOf(t, ns, "jvm")
		if len(pods) != 1 || !ready(&pods[0]) {
			return false, nil
		}
		pod = pods[0]
		return true, nil
	})

	newVPA(t, ns, "jvm", vpatypes.UpdateModeInPlace, nil)
	annotateVPA(t, ns, "jvm", map[string]string{"vpa-inplace.dev/observation-window": "3m"})
	recommend(t, ns, "jvm", "100m", "100Mi")
	resized := waitResized(t, ns, pod.Name, "100m", "100Mi")
	require.Equal(t, pod.UID, resized.UID, "resized in place")
	waitRecordWritten(t, ns, "jvm", "safety", pod.UID)
	waitFor(t, eventually, "the container restarted by its resize", func(context.Context) (bool, error) {
		return getPod(t, ns, pod.Name).Status.ContainerStatuses[0].RestartCount >= 1, nil
	})
	restarted := time.Now()
	waitFor(t, startup+eventually, "the pod Ready again once its probe passes", func(context.Context) (bool, error) {
		return ready(getPod(t, ns, pod.Name)), nil
	})
	t.Logf("Ready again %s after the restart its resize caused", time.Since(restarted).Round(time.Second))

	waitFor(t, 3*time.Minute+eventually, "the watch of the decrease over: its record gone", func(ctx context.Context) (bool, error) {
		written, err := recordWritten(ctx, ns, "jvm", "safety", pod.UID)
		return !written, err
	})
	p := getPod(t, ns, pod.Name)
	assert.Equal(t, pod.UID, p.UID)
	assert.Equal(t, "100Mi", memoryRequest(p), "not reverted")
	assert.Equal(t, int32(1), p.Status.ContainerStatuses[0].RestartCount, "restarted once: by its resize")
	assert.Zero(t, eventCount(t, ns, pod.Name, eventHarmed), "no harm")
	assert.Zero(t, eventCount(t, ns, pod.Name, eventReverted), "no revert")
}

// (b) A decrease of a single-pod VPA (no canary: its watch is no canary's);
// the updater restarted 30 s later; the container OOM-killed a minute after
// that (its process needs more than the lowered limit): the new updater
// reverts it in place and holds the values.
func TestTheWatchOfADecreaseSurvivesAnUpdaterRestart(t *testing.T) {
	script := os.Getenv("E2E_UPDATER_RESTART")
	require.NotEmpty(t, script, "E2E_UPDATER_RESTART names the script that restarts the updater (hack/e2e.sh sets it)")
	ns := newNamespace(t, nil)
	pod := deploy(t, ns, workload{name: "web", requests: rl("100m", "200Mi"), limits: rl("", "200Mi")})[0]
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	v := annotateVPA(t, ns, "web", map[string]string{"vpa-inplace.dev/observation-window": "5m"})
	recommend(t, ns, "web", "100m", "100Mi")
	waitResized(t, ns, pod.Name, "100m", "100Mi")
	lowered := time.Now()
	waitRecordWritten(t, ns, "web", "safety", pod.UID)

	// The scenario's own pace, not a wait for something not to happen.
	time.Sleep(time.Until(lowered.Add(30 * time.Second)))
	run(t, script)
	waitLeader(t, identityA)
	restarted := time.Now()
	time.Sleep(time.Until(restarted.Add(time.Minute)))
	_, err := kube.CoreV1().Pods(ns).Patch(ctxFor(t), pod.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+killAnnotation+`":"app=memory-limit-below:180Mi,restart:0"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	waitEvent(t, ns, pod.Name, eventHarmed, 1)
	back := waitResized(t, ns, pod.Name, "100m", "200Mi")
	t.Logf("OOM-killed and resized back in place %s after the updater's restart", time.Since(restarted).Round(time.Second))
	assert.Equal(t, pod.UID, back.UID, "reverted in place: the same pod")
	assert.Positive(t, back.Status.ContainerStatuses[0].RestartCount, "OOM-killed")
	waitEvent(t, ns, pod.Name, eventReverted, 1)
	waitRecordWritten(t, ns, "web", "safety", v.UID)
	waitConditionMessage(t, ns, "web", "no pod of the VPA is lowered to")
	requireStable(t, ns, pod.Name)
	assert.Equal(t, "200Mi", memoryRequest(getPod(t, ns, pod.Name)), "held: not lowered again")
}
