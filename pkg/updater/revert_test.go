package updater

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
	"github.com/vpa-inplace/vpa-inplace/pkg/window"
)

// Undoing harm is not a change to time: what holds resizes back in time
// (freezes, resize windows, a VPA's pause, a window annotation that cannot
// be read) never holds a revert. The emergency brake (the cluster-wide kill
// switch, --dry-run) holds everything, the revert included: it stays due,
// the condition says it waits, and it goes as soon as the switch is lifted.

// canaryWatched lowers p0 of two pods to 50Mi (the VPA's canary), and has
// its resize completed and watched for a minute.
func canaryWatched(t *testing.T, f *fixture) {
	t.Helper()
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	require.Equal(t, []string{"p0"}, f.resizedPods(), "the canary is lowered")
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	require.True(t, f.ctrl.watcher.Watching("uid-p0"))
	f.clock.Step(time.Minute)
}

func TestNoFreezeWindowOrPauseHoldsARevert(t *testing.T) {
	for _, tt := range []struct {
		name        string
		annotations map[string]string
	}{
		{"a freeze", map[string]string{window.FreezeAnnotation: t0.Add(2 * time.Hour).Format(time.RFC3339)}},
		{"the VPA's pause", map[string]string{PausedAnnotation: "true"}},
		{"a window annotation that cannot be read (frozen until corrected)", map[string]string{window.WindowAnnotation: "Mon-Fri 1-5 Europe/Berlin"}},
		{"a closed resize window of scope all", map[string]string{window.WindowAnnotation: nineToTen, window.ScopeAnnotation: "all"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			safety := records.NewInMemoryStore()
			f := newFixture(t, webPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{safety: safety})
			canaryWatched(t, f)
			f.setAnnotations("web", tt.annotations)
			f.oomKilled("p0")
			f.events()
			require.NoError(t, f.sync("p0"))

			assert.Equal(t, []string{"p0", "p0"}, f.resizedPods(), "the canary is resized back in place")
			assert.Equal(t, "100Mi", f.podMemory("p0"))
			assert.Len(t, eventsWith(f.events(), report.EventResizeReverted), 1)
			_, due := safety.Get("uid-p0")
			assert.False(t, due, "the revert was sent: its record goes")
			assert.InDelta(t, 0, counter(t, f, report.MetricResizesWithheld), 0)

			// The other pod's decrease is still held, by the hold after harm.
			require.NoError(t, f.sync("p1"))
			assert.Len(t, f.resizedPods(), 2)
		})
	}
}

func TestTheKillSwitchHoldsARevertUntilItIsLifted(t *testing.T) {
	configMap := func(paused string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "vpa-inplace-updater-config"},
			Data: map[string]string{PausedKey: paused}}
	}
	safety := records.NewInMemoryStore()
	f := newFixture(t, webPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{safety: safety, watchConfigMap: true})
	canaryWatched(t, f)
	_, err := f.kube.CoreV1().ConfigMaps(systemNamespace).Create(context.Background(), configMap("true"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { paused, _ := f.ctrl.clusterPaused(); return paused }, waitFor, every)
	f.oomKilled("p0")
	require.NoError(t, f.sync("p0"))

	assert.Equal(t, []string{"p0"}, f.resizedPods(), "the emergency brake holds the revert too")
	due, ok := safety.Get("uid-p0")
	require.True(t, ok, "the revert stays due")
	assert.Equal(t, records.KindRevert, due.Kind)
	st := f.stateOfPod("p0")
	assert.Equal(t, state.PodWithheld, st.State)
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonPaused, c.Reason)
	assert.Contains(t, c.Message, "Revert not sent (paused): p0 is to be resized back to c: requests cpu=100m memory=100Mi after harm; it is sent as soon as the kill switch is lifted.")

	f.run()
	_, err = f.kube.CoreV1().ConfigMaps(systemNamespace).Update(context.Background(), configMap("false"), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(f.resizedPods()) == 2 }, waitFor, every,
		"the switch's change alone queues the pod due a revert")
	assert.Equal(t, []string{"p0", "p0"}, f.resizedPods())
	assert.Equal(t, "100Mi", f.podMemory("p0"))
	require.Eventually(t, func() bool { _, ok := safety.Get("uid-p0"); return !ok }, waitFor, every, "the revert was sent: its record goes")
}
