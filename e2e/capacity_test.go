//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// With resize-when: fits-node (the default for Strimzi's pods), a resize the
// node has no room for is not sent at all: no resize write, the pod never
// shows PodResizePending (which Strimzi answers by restarting the broker).
// Once the filler pod goes, the resize is sent within seconds.
func TestFitsNodeSendsNothingUntilTheNodeHasRoom(t *testing.T) {
	ns := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	pods := deploy(t, ns, workload{name: "web", node: node, requests: rl("200m", "100Mi")})
	before := snap(pods)
	filler := fill(t, ns, node, "3")
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v.Annotations == nil {
			v.Annotations = map[string]string{}
		}
		v.Annotations["vpa-inplace.dev/resize-when"] = "fits-node"
		_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Update(ctxFor(t), v, metav1.UpdateOptions{})
		return err
	}))
	g0 := pods[0].Generation

	recommend(t, ns, "web", "1", "100Mi")
	waitConditionMessage(t, ns, "web", "1 waiting for node capacity")
	requireStable(t, ns, pods[0].Name)
	p := getPod(t, ns, pods[0].Name)
	assert.Equal(t, g0, p.Generation, "no resize sent")
	assert.Empty(t, resizeConditions(p), "never PodResizePending")
	assert.Positive(t, eventCount(t, ns, pods[0].Name, "InPlaceResizeWaitingForNodeCapacity"))

	require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctxFor(t), filler, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	start := time.Now()
	waitFor(t, eventually, "the resize sent once the node has room", func(context.Context) (bool, error) {
		return getPod(t, ns, pods[0].Name).Generation > g0, nil
	})
	t.Logf("resize sent %s after the filler's deletion", time.Since(start).Round(10*time.Millisecond))
	assert.Less(t, time.Since(start), 15*time.Second, "event-driven: the pod's node lost a pod")
	got := waitResized(t, ns, pods[0].Name, "1", "100Mi")
	assert.Equal(t, g0+1, got.Generation, "one patch")
	requireNotDisrupted(t, ns, "web", before)
}
