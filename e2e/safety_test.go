//go:build e2e

package e2e

// Safety after the resize (docs/safety-after-resize.md, issue #34 parts 1-3):
// a decrease goes to a canary first; the canary OOM-killed after it is
// resized back in place and the values are held for the VPA, across an
// updater restart; a canary without harm lets the others follow once its
// window ends. hack/e2e.sh runs the updater with --canary=off and
// --resize-observation-window=20s: the VPAs here ask for one canary by
// annotation, so that the other tests' decreases are not paced.

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	// e2eObservationWindow is hack/e2e.sh's --resize-observation-window.
	e2eObservationWindow = 20 * time.Second
	eventHarmed          = "InPlaceResizeHarmed"
	eventReverted        = "InPlaceResizeReverted"
	eventCanary          = "InPlaceResizeCanary"
	eventWaitingCanary   = "InPlaceResizeWaitingForCanary"
)

// canaryVPA creates an InPlace VPA for the Deployment that asks for one
// canary.
func canaryVPA(t *testing.T, ns, target string) *vpatypes.VerticalPodAutoscaler {
	t.Helper()
	newVPA(t, ns, target, vpatypes.UpdateModeInPlace, nil)
	return annotateVPA(t, ns, target, map[string]string{"vpa-inplace.dev/canary": "1"})
}

func memoryRequest(p *corev1.Pod) string {
	return p.Spec.Containers[0].Resources.Requests.Memory().String()
}

// lowered returns the pods of app whose memory request is mem.
func lowered(t *testing.T, ns, app, mem string) []string {
	var out []string
	for _, p := range podsOf(t, ns, app) {
		if memoryRequest(&p) == mem {
			out = append(out, p.Name)
		}
	}
	return out
}

// requireStablePods watches the pods but skip for settle, all at once, and
// fails if one's generation changes (a resize sent) or it goes away.
func requireStablePods(t *testing.T, ns string, pods []corev1.Pod, skip string) {
	t.Helper()
	generations := map[string]int64{}
	for _, p := range pods {
		if p.Name != skip {
			generations[p.Name] = getPod(t, ns, p.Name).Generation
		}
	}
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		for name, g := range generations {
			p, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err, "pod %s must still exist", name)
			require.Equal(t, g, p.Generation, "no resize may be sent to %s meanwhile", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// (a) Four pods, a memory decrease: the canary is OOM-killed after it (its
// process needs more than the new limit), is resized back in place (same
// UID), the three others never get the value, and the hold survives an
// updater restart.
func TestCanaryOOMKilledIsRevertedAndTheValuesHeld(t *testing.T) {
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", replicas: 4, requests: rl("100m", "200Mi"), limits: rl("", "200Mi"),
		annotation: map[string]string{killAnnotation: "app=memory-limit-below:180Mi"}})
	uids := map[string]string{}
	for _, p := range pods {
		uids[p.Name] = string(p.UID)
	}
	v := canaryVPA(t, ns, "web")
	start := time.Now()
	recommend(t, ns, "web", "100m", "100Mi")

	var canary string
	waitFor(t, eventually, "one canary lowered to 100Mi", func(context.Context) (bool, error) {
		// The canary may be lowered, OOM-killed and resized back between
		// two looks: the pod sent a resize is also the one whose
		// generation moved.
		var sent []string
		for _, p := range podsOf(t, ns, "web") {
			if memoryRequest(&p) == "100Mi" || p.Generation > 1 {
				sent = append(sent, p.Name)
			}
		}
		if len(sent) > 0 {
			canary = sent[0]
		}
		return len(sent) == 1, nil
	})
	waitEvent(t, ns, canary, eventCanary, 1)
	waitEvent(t, ns, canary, eventHarmed, 1)
	back := waitResized(t, ns, canary, "100m", "200Mi")
	t.Logf("canary %s OOM-killed and resized back in place %s after the recommendation", canary, time.Since(start).Round(time.Second))
	assert.Equal(t, uids[canary], string(back.UID), "reverted in place: the same pod")
	assert.Positive(t, back.Status.ContainerStatuses[0].RestartCount, "the canary was OOM-killed")
	waitEvent(t, ns, canary, eventReverted, 1)
	waitRecordWritten(t, ns, "web", "safety", v.UID)

	others := func() {
		t.Helper()
		for _, p := range podsOf(t, ns, "web") {
			if p.Name == canary {
				continue
			}
			assert.Equal(t, "200Mi", memoryRequest(&p), "pod %s never gets the held value", p.Name)
			assert.Equal(t, uids[p.Name], string(p.UID))
			assert.Zero(t, p.Status.ContainerStatuses[0].RestartCount, "pod %s never OOM-killed", p.Name)
		}
	}
	requireStablePods(t, ns, pods, canary)
	others()

	// The hold is a record: a restarted updater holds it too.
	script := os.Getenv("E2E_UPDATER_RESTART")
	if script == "" {
		t.Log("E2E_UPDATER_RESTART is not set: the restart part is not run")
		return
	}
	run(t, script)
	waitLeader(t, identityA)
	requireStablePods(t, ns, pods, canary)
	others()
	assert.Equal(t, "200Mi", memoryRequest(getPod(t, ns, canary)), "the canary stays where it was reverted to")
}

// (b) A decrease without harm: the canary first, the three others once it
// has been watched for the window (shortened by flag).
func TestCanaryWithoutHarmThenTheOthersAfterTheWindow(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", replicas: 4, requests: rl("100m", "200Mi")})
	before := snap(pods)
	canaryVPA(t, ns, "web")
	recommend(t, ns, "web", "100m", "150Mi")

	var canary string
	waitFor(t, eventually, "one canary lowered to 150Mi", func(context.Context) (bool, error) {
		l := lowered(t, ns, "web", "150Mi")
		if len(l) > 0 {
			canary = l[0]
		}
		return len(l) == 1, nil
	})
	waitResized(t, ns, canary, "100m", "150Mi")
	done := time.Now()
	waitEvent(t, ns, canary, eventCanary, 1)
	// Well within the window: the others wait.
	time.Sleep(e2eObservationWindow / 2)
	require.Equal(t, []string{canary}, lowered(t, ns, "web", "150Mi"), "nothing but the canary before its window ends")
	for _, p := range pods {
		if p.Name != canary {
			assert.Positive(t, eventCount(t, ns, p.Name, eventWaitingCanary), "pod %s says it waits for the canary", p.Name)
		}
	}
	for _, p := range pods {
		if p.Name != canary {
			waitResized(t, ns, p.Name, "100m", "150Mi")
		}
	}
	after := time.Since(done)
	t.Logf("the other pods lowered %s after the canary's resize completed (window %s)", after.Round(time.Second), e2eObservationWindow)
	assert.GreaterOrEqual(t, after, e2eObservationWindow-2*time.Second, "not before the canary's window ended")
	requireNotDisrupted(t, ns, "web", before)
}
