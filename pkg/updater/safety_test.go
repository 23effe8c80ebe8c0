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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clienttesting "k8s.io/client-go/testing"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// webPods are n Running pods of one ReplicaSet, at 100m/100Mi.
func webPods(n int) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, webPod(fmt.Sprintf("p%d", i)).Running().Obj())
	}
	return pods
}

// oomKilled makes the kubelet report that the pod's container was
// OOM-killed and restarted.
func (f *fixture) oomKilled(name string) {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	cs := &p.Status.ContainerStatuses[0]
	cs.RestartCount++
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(f.clock.Now())}}
	written, err := f.kube.CoreV1().Pods("default").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	require.Eventually(f.t, func() bool {
		c, err := f.ctrl.pods.Pods("default").Get(name)
		return err == nil && c.ResourceVersion == written.ResourceVersion
	}, waitFor, 10*time.Millisecond)
}

// podMemory is the memory request of the pod's container, as the API
// server holds it.
func (f *fixture) podMemory(name string) string {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return p.Spec.Containers[0].Resources.Requests.Memory().String()
}

// stateOfPod is the state the tracker holds for a pod of the web VPA.
func (f *fixture) stateOfPod(name string) state.Pod {
	for _, st := range f.ctrl.tracker.Of("default/web") {
		if st.Name == name {
			return st
		}
	}
	return state.Pod{}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// Issue #34 parts 1 and 2: the canary of a memory decrease is OOM-killed
// within its window; it is resized back in place, the values are held for
// the whole VPA, and no other pod gets them, even after a restart.
func TestHarmAfterADecreaseRevertsThePodAndHoldsTheValuesForTheVPA(t *testing.T) {
	safety := records.NewInMemoryStore()
	vpa := inPlaceVPA("100m", "50Mi")
	f := newFixture(t, webPods(4), []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{safety: safety})
	for i := range 4 {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	require.Equal(t, []string{"p0"}, f.resizedPods(), "one canary of four")
	for i := 1; i < 4; i++ {
		assert.Equal(t, state.PodCanaryWait, f.stateOfPod(fmt.Sprintf("p%d", i)).State)
	}

	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	assert.True(t, f.ctrl.watcher.Watching("uid-p0"), "the canary is watched once its resize completed")
	f.clock.Step(time.Minute)
	f.oomKilled("p0")
	f.recorder.unread("Pod")
	f.recorder.unread("VerticalPodAutoscaler")
	require.NoError(t, f.sync("p0"))

	assert.Equal(t, []string{"p0", "p0"}, f.resizedPods(), "the canary is resized back in place")
	assert.Equal(t, "100Mi", f.podMemory("p0"))
	ev := f.events()
	assert.True(t, containsPrefix(ev, "Pod/p0 Warning "+report.EventResizeHarmed+" Container c OOMKilled (exit code 137)"), "%v", ev)
	assert.True(t, containsPrefix(ev, "Pod/p0 Warning "+report.EventResizeReverted+" Resized back in place to c: requests cpu=100m memory=100Mi"), "%v", ev)
	vev := f.vpaEvents()
	assert.True(t, containsPrefix(vev, "VerticalPodAutoscaler/web Warning "+report.EventResizeHarmed), "%v", vev)
	assert.True(t, containsPrefix(vev, "VerticalPodAutoscaler/web Warning "+report.EventResizeReverted), "%v", vev)
	hold, ok := safety.Get(vpa.UID)
	require.True(t, ok, "the hold is a record, keyed by the VPA")
	assert.Equal(t, records.KindHarmHold, hold.Kind)
	assert.Equal(t, "c: requests memory=50Mi", hold.Attempted.String())
	_, due := safety.Get("uid-p0")
	assert.False(t, due, "the revert was sent: its record goes")
	assert.InDelta(t, 1, counter(t, f, report.MetricReverts), 0)

	for i := 1; i < 4; i++ {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
		assert.Equal(t, state.PodHeldAfterHarm, f.stateOfPod(fmt.Sprintf("p%d", i)).State)
	}
	assert.Len(t, f.resizedPods(), 2, "no other pod gets the values")
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, "ResizeReverted", c.Reason)

	// A new updater, on the same records: the hold holds.
	g := newFixture(t, webPods(4), []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{safety: safety})
	for i := 1; i < 4; i++ {
		require.NoError(t, g.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Empty(t, g.resizedPods(), "the hold survives a restart")

	// The recommendation rises above the held values: the hold goes.
	up := inPlaceVPA("100m", "60Mi")
	up.ResourceVersion = "2"
	_, err := g.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(g.ctx, up, metav1.UpdateOptions{})
	require.NoError(t, err)
	g.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool {
		return v.Status.Recommendation.ContainerRecommendations[0].Target.Memory().String() == "60Mi"
	})
	require.NoError(t, g.sync("p1"))
	_, ok = safety.Get(vpa.UID)
	assert.False(t, ok, "a recommendation above the held values lifts the hold")
	assert.Equal(t, []string{"p1"}, g.resizedPods(), "a decrease to 60Mi goes to a canary again")
}

// Harm after a resize that raised values is reported, not reverted.
func TestHarmAfterAnIncreaseIsReportedNotReverted(t *testing.T) {
	f := newFixture(t, webPods(1), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p0"))
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	f.oomKilled("p0")
	f.recorder.unread("Pod")
	require.NoError(t, f.sync("p0"))
	assert.Len(t, f.resizedPods(), 1, "nothing is reverted")
	ev := f.events()
	assert.True(t, containsPrefix(ev, "Pod/p0 Warning "+report.EventResizeHarmed+" Container c OOMKilled"), "%v", ev)
	assert.True(t, strings.Contains(strings.Join(ev, "\n"), "reported, not reverted"), "%v", ev)
	_, held := f.ctrl.canaries.Hold(webOwner)
	assert.False(t, held)
}

// Issue #34 part 3: a decrease goes to one canary, and to the other pods
// once the canary has been watched for its window without harm.
func TestADecreaseGoesToTheCanaryThenToTheOthersAfterItsWindow(t *testing.T) {
	const window = 2 * time.Minute
	f := newFixture(t, webPods(4), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{observationWindow: window})
	for i := range 4 {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	require.Equal(t, []string{"p0"}, f.resizedPods())
	ev := f.events()
	assert.True(t, containsPrefix(ev, "Pod/p0 Normal "+report.EventResizeCanary), "%v", ev)
	assert.True(t, containsPrefix(ev, "Pod/p1 Normal "+report.EventResizeWaitingForCanary+" Decrease to c: requests cpu=100m memory=100Mi not made now: c requests memory not lowered yet: canary: 1 of 4 lowered, 3 wait"), "%v", ev)

	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	assert.Contains(t, f.podQueue.asked("default/p0"), window, "the canary is looked at again when its window ends")
	require.NoError(t, f.sync("p1"))
	assert.Equal(t, []string{"p0"}, f.resizedPods(), "nothing more before the window ends")
	assert.Contains(t, f.stateOfPod("p1").Message, "canary: 1 of 4 lowered, 3 wait until "+t0.Add(window).UTC().Format(time.RFC3339))

	f.clock.Step(window)
	f.queued()
	require.NoError(t, f.sync("p0"))
	// (p0 itself may be there too: its own delayed look at its window's
	// end reaches the queue when it will.)
	assert.Subset(t, f.queued(), []string{"default/p1", "default/p2", "default/p3"}, "the waiting pods go once the canary passed")
	for i := 1; i < 4; i++ {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Equal(t, []string{"p0", "p1", "p2", "p3"}, f.resizedPods())
	assert.True(t, containsPrefix(f.vpaEvents(), "VerticalPodAutoscaler/web Normal "+report.EventResizeCanaryPassed), "canary passed is said on the VPA")
}

// Increases are not paced: every pod at once.
func TestAnIncreaseGoesToEveryPodAtOnce(t *testing.T) {
	f := newFixture(t, webPods(4), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{})
	for i := range 4 {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Len(t, f.resizedPods(), 4)
}

// Many workers deciding on the pods of one VPA at once, each pod several
// times, with patches slow to answer: one canary, never more, whatever the
// worker count (the check and the canary's place are one step).
func TestOneCanaryWhateverTheWorkersDeciding(t *testing.T) {
	const pods = 8
	f := newFixture(t, webPods(pods), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{})
	var mu sync.Mutex
	lowered := sets.New[string]()
	f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "resize" {
			return false, nil, nil
		}
		mu.Lock()
		lowered.Insert(a.(clienttesting.PatchAction).GetName())
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		return false, nil, nil
	})
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 * pods {
		wg.Go(func() {
			<-start
			assert.NoError(t, f.sync(fmt.Sprintf("p%d", w%pods)))
		})
	}
	close(start)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, lowered.Len(), "pods lowered before the canary's window ended: %v", sets.List(lowered))
}

// A VPA's canary annotation "off" lowers every pod at once; a bad value is
// reported and the default is used.
func TestCanaryAnnotation(t *testing.T) {
	off := inPlaceVPA("100m", "50Mi")
	off.Annotations = map[string]string{resize.CanaryAnnotation: "off"}
	f := newFixture(t, webPods(3), []*vpatypes.VerticalPodAutoscaler{off}, fixtureOpts{})
	for i := range 3 {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Len(t, f.resizedPods(), 3)

	bad := inPlaceVPA("100m", "50Mi")
	bad.Annotations = map[string]string{resize.CanaryAnnotation: strings.Repeat("9", 100)}
	g := newFixture(t, webPods(3), []*vpatypes.VerticalPodAutoscaler{bad}, fixtureOpts{})
	for i := range 3 {
		require.NoError(t, g.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Len(t, g.resizedPods(), 1, "the default, one canary")
	assert.True(t, containsPrefix(g.vpaEvents(), "VerticalPodAutoscaler/web Warning "+report.EventSafetyAnnotationInvalid), "bad value reported")
}
