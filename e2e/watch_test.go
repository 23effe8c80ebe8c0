//go:build e2e

package e2e

// The watch after a resize (docs/safety-after-resize.md, sections 1 and 2):
// the watch of a single-pod VPA's decrease survives a restart of the
// updater, and an OOM kill after it is reverted in place and held. It relies
// on the hollow node's kill annotation (hack/cluster/cmd/hollow-node,
// kill.go). The VPA sets its own observation window: the suite's
// --resize-observation-window=20s is shorter than the scenario.

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// A decrease of a single-pod VPA (no canary: its watch is no canary's);
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
