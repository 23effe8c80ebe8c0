package updater

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// sidecarPod is a Running pod of the web workload with app container "c",
// a completed init container "setup" and a sidecar "proxy".
func sidecarPod(name string) *testpod.Builder {
	return webPod(name).InitContainer("setup", "1", "").Sidecar("proxy", "50m", "64Mi")
}

func TestSidecarIsResizedInPlace(t *testing.T) {
	vpa := testvpa.New("web").InPlace().Recommend("c", "100m", "100Mi").Recommend("proxy", "100m", "128Mi").Obj()
	f := newFixture(t, []*corev1.Pod{sidecarPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	require.Equal(t, []string{`{"spec":{"containers":[],"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}]}}`},
		f.resizePatches())
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], report.EventResizeSent+" Resizing in place to c: requests cpu=100m memory=100Mi; proxy: requests cpu=100m memory=128Mi")
	st, ok := f.ctrl.tracker.Get("uid-p")
	require.True(t, ok)
	assert.Equal(t, state.PodInProgress, st.State)
}

// A restarting resize of a sidecar counts against the workload's
// disruption budget as one of an app container does.
func TestRestartingSidecarResizeTakesAPlaceInTheBudget(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 2 {
		pods = append(pods, sidecarPod(fmt.Sprintf("p%d", i)).ResizePolicy("proxy", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj())
	}
	vpa := testvpa.New("web").InPlace().Recommend("c", "100m", "100Mi").Recommend("proxy", "50m", "128Mi").Obj()
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{tolerance: 0.5})
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	assert.Equal(t, []string{"p0"}, f.resizedPods(), "one pod of two restarts at a time")
	st, ok := f.ctrl.tracker.Get("uid-p1")
	require.True(t, ok)
	assert.Equal(t, state.PodWaiting, st.State)
}

func TestInitContainerRecommendationIsIgnoredAndReportedOnce(t *testing.T) {
	vpa := testvpa.New("web").InPlace().Recommend("c", "100m", "100Mi").Recommend("setup", "2", "1Gi").Obj()
	pods := []*corev1.Pod{sidecarPod("p0").Running().Obj(), sidecarPod("p1").Running().Obj()}
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	for range 3 {
		require.NoError(t, f.sync("p0"))
		require.NoError(t, f.sync("p1"))
	}
	assert.Empty(t, f.resizePatches(), "nothing to resize: the app container has its recommendation")
	events := f.vpaEvents()
	require.Len(t, events, 1, "once per VPA, not per pod or sync")
	assert.Contains(t, events[0], "VerticalPodAutoscaler/web Warning "+report.EventInitContainerRecommendationIgnored)
	assert.Contains(t, events[0], "init containers of pod p0 that are not sidecars (restartPolicy Always): setup; ignored")
	assert.Empty(t, f.events(), "nothing on the pods")

	// Deleted and created again, the VPA is told again.
	f.ctrl.onVPADelete(vpa)
	require.NoError(t, f.sync("p1"))
	assert.Len(t, f.vpaEvents(), 1)
}

// Workers deciding pods of one VPA at once report it once: the check and
// the remembering are one step.
func TestInitContainerRecommendationIsReportedOnceByConcurrentWorkers(t *testing.T) {
	const n = 16
	vpa := testvpa.New("web").InPlace().Recommend("setup", "2", "1Gi").Obj()
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, sidecarPod(fmt.Sprintf("p%d", i)).Running().Obj())
	}
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	// Events take a while when the API server is busy: a report checked
	// before it is sent and remembered after lets every worker through.
	f.ctrl.recorder = slowRecorder{EventRecorder: f.ctrl.recorder}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 * n {
		wg.Go(func() {
			<-start
			f.ctrl.reportIgnoredInitContainers(f.ctx, pods[i%n], vpa)
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, 1, len(f.vpaEvents()), "events on the VPA")
}

// slowRecorder takes a while for every event.
type slowRecorder struct{ record.EventRecorder }

func (r slowRecorder) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	time.Sleep(20 * time.Millisecond)
	r.EventRecorder.Eventf(obj, eventType, reason, messageFmt, args...)
}

func TestInitContainerRecommendationReportNamesABoundedList(t *testing.T) {
	b := webPod("p")
	v := testvpa.New("web").InPlace()
	for i := range 20 {
		name := fmt.Sprintf("init-%02d", i)
		b.InitContainer(name, "", "")
		v.Recommend(name, "1", "")
	}
	vpa := v.Obj()
	f := newFixture(t, []*corev1.Pod{b.Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	events := f.vpaEvents()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "init-07 and 12 more;")
	assert.Equal(t, 8, strings.Count(events[0], "init-"))
}

// A pod's update is looked at when it concerns its sidecars as when it
// concerns its app containers: their spec (a resize sent), and what the
// kubelet reports of them (a resize actuated, seen on 1.33 without
// observedGeneration).
func TestSidecarChangesAreRelevant(t *testing.T) {
	base := func() *corev1.Pod {
		p := sidecarPod("p").Running().Obj()
		p.ResourceVersion = "1"
		return p
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"nothing but the version", func(*corev1.Pod) {}, false},
		{"the sidecar's spec resources", func(p *corev1.Pod) {
			p.Spec.InitContainers[1].Resources.Requests = testpod.List("100m", "64Mi")
		}, true},
		{"the sidecar's allocated resources", func(p *corev1.Pod) {
			p.Status.InitContainerStatuses[1].AllocatedResources = testpod.List("100m", "64Mi")
		}, true},
		{"the sidecar's actuated resources", func(p *corev1.Pod) {
			p.Status.InitContainerStatuses[1].Resources = &corev1.ResourceRequirements{Requests: testpod.List("100m", "64Mi")}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, pod := base(), base()
			pod.ResourceVersion = "2"
			tc.change(pod)
			assert.Equal(t, tc.want, relevantPodChange(old, pod))
		})
	}
}

// A sidecar whose request went down leaves room on the node, as an app
// container does: the pods waiting for room there are looked at again.
func TestLoweredSidecarFreesRoom(t *testing.T) {
	old := sidecarPod("p").Running().Obj()
	pod := old.DeepCopy()
	pod.Spec.InitContainers[1].Resources.Requests = testpod.List("10m", "64Mi")
	assert.True(t, freesRoom(old, pod))
	assert.False(t, freesRoom(pod, old))
}
