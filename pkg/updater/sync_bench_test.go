package updater

import (
	"fmt"
	"runtime"
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

// BenchmarkRetainedPerResize measures the heap the controller keeps for each
// resize sent, after a collection: the watch of the resize for its window
// (its values before and after, the restart counts it compares) and the
// sent resize's place in the tracker. 500 pods of one VPA are resized once
// each per iteration; the figure is retained-B/resize (the fake clientset's
// copies of the pods it patched count too, as the informer's would).
func BenchmarkRetainedPerResize(b *testing.B) {
	const n = 500
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = webPod(fmt.Sprintf("p%d", i)).Running().Obj()
	}
	var retained int64
	for b.Loop() {
		b.StopTimer()
		f := newFixture(b, pods, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("200m", "200Mi")},
			fixtureOpts{decreaseMinHistory: time.Hour, observationWindow: 10 * time.Minute})
		before := heapAfterGC()
		b.StartTimer()
		for _, p := range pods {
			if err := f.sync(p.Name); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		require.Len(b, f.resizePatches(), n, "every pod resized once")
		require.Equal(b, n, f.ctrl.watcher.Len(), "every resize watched")
		// The fake clientset's log of requests is the test's, not the
		// controller's.
		f.kube.ClearActions()
		retained += heapAfterGC() - before
		runtime.KeepAlive(f)
		b.StartTimer()
	}
	b.ReportMetric(float64(retained)/float64(b.N*n), "retained-B/resize")
}

func heapAfterGC() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
