package updater

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// evictedAndDeleted has the kubelet evict the pod, and the pod deleted.
func (f *fixture) evictedAndDeleted(name string) {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
	_, err = f.kube.CoreV1().Pods("default").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	require.Eventually(f.t, func() bool {
		c, err := f.ctrl.pods.Pods("default").Get(name)
		return err == nil && c.Status.Reason == "Evicted"
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(f.t, f.kube.CoreV1().Pods("default").Delete(f.ctx, name, metav1.DeleteOptions{}))
}

// goneHarmsOf counts the harm kept for the VPA's key.
func (f *fixture) goneHarmsOf(key string) int {
	f.ctrl.mu.Lock()
	defer f.ctrl.mu.Unlock()
	return len(f.ctrl.goneHarms[key])
}

// Harm a deleted pod's last state showed (an eviction by the kubelet after
// a decrease) is kept for the VPA queue's worker. When its VPA is gone, or
// no longer InPlace, nothing will act on it: it is freed, not kept for the
// life of the process (with the pod object it holds).
func TestHarmOfDeletedPodsIsFreedWhenTheirVPAIsGoneOrNoLongerInPlace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *fixture)
	}{
		{"the VPA is deleted before its pod", func(f *fixture) {
			require.NoError(t, f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Delete(f.ctx, "web", metav1.DeleteOptions{}))
			require.Eventually(t, func() bool {
				_, err := f.ctrl.vpas.VerticalPodAutoscalers("default").Get("web")
				return err != nil
			}, 10*time.Second, 10*time.Millisecond)
		}},
		{"the VPA is no longer InPlace", func(f *fixture) {
			off := inPlaceVPA("100m", "50Mi")
			mode := vpatypes.UpdateModeOff
			off.Spec.UpdatePolicy.UpdateMode = &mode
			off.ResourceVersion = "2"
			_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(f.ctx, off, metav1.UpdateOptions{})
			require.NoError(t, err)
			f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool { return !isInPlace(v) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, webPods(1), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{})
			require.NoError(t, f.sync("p0"))
			require.Equal(t, []string{"p0"}, f.resizedPods())
			f.kubeletDone("p0")
			require.NoError(t, f.sync("p0"))
			require.True(t, f.ctrl.watcher.Watching("uid-p0"))

			tc.change(f)
			f.evictedAndDeleted("p0")
			require.Eventually(t, func() bool { return f.goneHarmsOf("default/web") == 1 }, 10*time.Second, 10*time.Millisecond,
				"the eviction is kept for the VPA's worker")
			require.NoError(t, f.ctrl.syncVPA(f.ctx, "default/web"))
			assert.Zero(t, f.goneHarmsOf("default/web"), "nothing will act on it: freed")
			_, held := f.ctrl.canaries.Hold(webOwner)
			assert.False(t, held, "and no hold is set for a VPA that does not resize in place")
		})
	}
}
