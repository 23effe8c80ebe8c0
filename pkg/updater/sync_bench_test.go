package updater

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// BenchmarkSyncUpToDate measures one decision for a running pod that already
// has what its VPA recommends: what each pod costs at every resync
// (--updater-interval) and at most of its updates. The controller runs with
// the binary's defaults for what is decided on every sync: a canary of 1,
// a 10-minute observation window and an hour of evidence for decreases.
func BenchmarkSyncUpToDate(b *testing.B) {
	pods := make([]*corev1.Pod, 10)
	for i := range pods {
		pods[i] = webPod(fmt.Sprintf("p%d", i)).Running().Obj()
	}
	f := newFixture(b, pods, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")},
		fixtureOpts{decreaseMinHistory: time.Hour, observationWindow: 10 * time.Minute})
	for _, p := range pods {
		require.NoError(b, f.sync(p.Name))
	}
	require.Empty(b, f.resizePatches(), "up to date: nothing is sent")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := f.sync(pods[i%len(pods)].Name); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	require.Empty(b, f.resizePatches(), "up to date: nothing is sent")
}
