//go:build e2e

package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Part 0 of issue #34, with the real recommender: a new VPA over a running
// pod (100m/100Mi requested, 300m/300Mi used). The recommender's first
// answer, before it has a sample, is its floor; the updater (default
// --decrease-min-history: the one serving the scoped namespace, started
// here) never lowers the pod to it, and the first resize goes straight to
// the real recommendation, above the requests.
func TestRecommenderNewVPAIsNotResizedToTheFloor(t *testing.T) {
	rec := recommenderName(t)
	binary, kubeconfig := os.Getenv("E2E_UPDATER_BINARY"), os.Getenv("E2E_UPDATER_KUBECONFIG")
	if binary == "" || kubeconfig == "" {
		t.Skip("E2E_UPDATER_BINARY and E2E_UPDATER_KUBECONFIG are not set (hack/e2e.sh sets them): the namespaced updater runs as a process here")
	}
	ns := fixedNamespace(t, env("E2E_SCOPED_NAMESPACE", "e2e-scoped"))
	startScopedUpdater(t, binary, kubeconfig, ns)
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi"),
		annotation: map[string]string{hollowUsage: "app=cpu:300m,memory:300Mi"}})
	pod := pods[0]
	before := snap(pods)
	g0 := pod.Generation
	created := time.Now()
	require.NoError(t, newRecommendedVPA(ctxFor(t), ns, "web", rec))

	lowest := pod.Spec.Containers[0].Resources.Requests.Cpu().DeepCopy()
	var firstTarget string
	waitFor(t, 4*time.Minute, "the first resize of the pod", func(ctx context.Context) (bool, error) {
		if firstTarget == "" {
			if v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{}); err == nil {
				if tgt, ok := target(v, "cpu"); ok {
					firstTarget = tgt.String()
					t.Logf("first recommendation %.1fs after the VPA: cpu %s", time.Since(created).Seconds(), firstTarget)
				}
			}
		}
		p := getPod(t, ns, pod.Name)
		cpu := p.Spec.Containers[0].Resources.Requests.Cpu()
		if cpu.Cmp(lowest) < 0 {
			lowest = cpu.DeepCopy()
		}
		return p.Generation > g0, nil
	})
	p := getPod(t, ns, pod.Name)
	cpu := p.Spec.Containers[0].Resources.Requests.Cpu()
	t.Logf("first resize %.1fs after the VPA: cpu %s (the recommender's first target was %s; %d InPlaceResizeHeld events)",
		time.Since(created).Seconds(), cpu.String(), firstTarget, eventCount(t, ns, pod.Name, eventResizeHeld))
	assert.Equal(t, "100m", lowest.String(), "the pod was never lowered")
	assert.Equal(t, 1, cpu.Cmp(rl("100m", "100Mi")["cpu"]), "the first resize raises the pod to the real recommendation")
	assert.Equal(t, g0+1, p.Generation, "one resize")
	requireNotDisrupted(t, ns, "web", before)
}
