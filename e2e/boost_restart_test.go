//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	eventBoostReapplied = "InPlaceStartupBoostReapplied"
	// killAnnotation makes the hollow kubelet kill a container
	// (hack/cluster/README.md, Kills).
	killAnnotation = "hollow-node.vpa-inplace.dev/kill"
	// restartBoostSeconds is the boost's durationSeconds here: a few
	// seconds, so that the test is short.
	restartBoostSeconds = 5
)

// oomKill asks the hollow kubelet to kill the pod's container "app" once, as
// the OOM killer would, while its restart count is restarts.
func oomKill(t *testing.T, ns, pod string, restarts int32) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		killAnnotation: "app=reason:OOMKilled,restart:" + strconv.Itoa(int(restarts))}}})
	require.NoError(t, err)
	_, err = kube.CoreV1().Pods(ns).Patch(ctxFor(t), pod, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// waitRestarted waits until container "app" runs again after its restart
// number restarts, Ready, and returns the pod.
func waitRestarted(t *testing.T, ns, pod string, restarts int32) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	waitFor(t, eventually, "the container restarted and Ready", func(context.Context) (bool, error) {
		p = getPod(t, ns, pod)
		st := p.Status.ContainerStatuses
		return len(st) == 1 && st[0].RestartCount == restarts && st[0].State.Running != nil && ready(p), nil
	})
	return p
}

// Issue #34 (e2e d): a boosted container that crashes after its boost
// ended is boosted again in place for the boost's duration, then
// unboosted, with no other restart than its crash and the same pod.
func TestStartupBoostAgainAfterACrash(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	boostVPAFor(t, ns, "crashy", restartBoostSeconds)
	pods := deploy(t, ns, workload{name: "crashy", requests: rl("100m", "100Mi")})
	pod := pods[0]
	require.Equal(t, "300m", cpuRequest(&pod), "created boosted")
	waitResized(t, ns, pod.Name, "150m", "100Mi")
	waitFor(t, eventually, "the startup boost's annotation removed", func(context.Context) (bool, error) {
		_, ok := getPod(t, ns, pod.Name).Annotations[boostKey]
		return !ok, nil
	})
	waitEvent(t, ns, pod.Name, eventBoostEnded, 1)

	start := time.Now()
	oomKill(t, ns, pod.Name, 0)
	p := waitRestarted(t, ns, pod.Name, 1)
	restarted := time.Since(start)
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	require.NotNil(t, last, "the crash is the container's last state")
	assert.Equal(t, "OOMKilled", last.Reason)

	// Boosted again: in place, the same pod and container instance. The
	// spec is what tells: a slow kubelet may apply the boost late in its
	// few seconds, so the test does not wait for it to be applied.
	var boosted *corev1.Pod
	waitFor(t, eventually, "the boost in the spec", func(context.Context) (bool, error) {
		boosted = getPod(t, ns, pod.Name)
		return cpuRequest(boosted) == "300m", nil
	})
	reboosted := time.Since(start)
	waitEvent(t, ns, pod.Name, eventBoostReapplied, 1)
	// The boost lasts from Ready or the new instance's start, the later:
	// the kubelet may restart the container before the pod's Ready falls.
	since := readySince(boosted)
	if started := boosted.Status.ContainerStatuses[0].State.Running.StartedAt.Time; started.After(since) {
		since = started
	}

	var endedAt time.Time
	waitFor(t, eventually, "the boost's end", func(context.Context) (bool, error) {
		if cpuRequest(getPod(t, ns, pod.Name)) == "300m" {
			return false, nil
		}
		endedAt = time.Now()
		return true, nil
	})
	got := waitResized(t, ns, pod.Name, "150m", "100Mi")
	waitEvent(t, ns, pod.Name, eventBoostEnded, 2)
	late := endedAt.Sub(since) - restartBoostSeconds*time.Second
	t.Logf("restarted %v after the kill, boosted again %v after it; unboosted %v after Ready + %ds",
		restarted.Round(10*time.Millisecond), reboosted.Round(10*time.Millisecond), late.Round(10*time.Millisecond), restartBoostSeconds)
	assert.True(t, late > -time.Second && late <= 3*time.Second, "ended %v after Ready + durationSeconds", late)
	assert.Equal(t, "300m", cpuRequest(boosted))

	assert.Equal(t, pod.UID, got.UID, "the same pod")
	assert.Equal(t, int32(1), got.Status.ContainerStatuses[0].RestartCount, "the resizes restarted nothing")
	assert.Equal(t, pod.Generation+3, got.Generation, "three resizes: the startup boost's end, the boost again, its end")
	assert.GreaterOrEqual(t, updaterMetric(t, "vpa_inplace_updater_startup_boost_restarts_total"), 2.0, "a boost again and its end counted")
}
