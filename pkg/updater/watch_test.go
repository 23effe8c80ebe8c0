package updater

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// The watch after a resize (docs/safety-after-resize.md, sections 1 and
// 2): what it takes for harm and what it does not, across later resizes
// and restarts of the updater.

// updateStatus changes the pod's status as the kubelet would, and waits
// for the cache to hold it.
func (f *fixture) updateStatus(name string, change func(p *corev1.Pod)) {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	change(p)
	written, err := f.kube.CoreV1().Pods("default").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	require.Eventually(f.t, func() bool {
		c, err := f.ctrl.pods.Pods("default").Get(name)
		return err == nil && c.ResourceVersion == written.ResourceVersion
	}, 10*time.Second, 10*time.Millisecond)
}

// setReady sets the pod's Ready condition, turned now.
func (f *fixture) setReady(name string, ready bool) {
	f.t.Helper()
	f.updateStatus(name, func(p *corev1.Pod) {
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady {
				c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(f.clock.Now())
				if ready {
					c.Status = corev1.ConditionTrue
				}
			}
		}
		p.Status.ContainerStatuses[0].Ready = ready
	})
}

// kubeletRestarted applies the pod's resize as the kubelet does under
// resizePolicy RestartContainer: the container is killed and started again
// with the new resources, and is not Ready until its probe passes.
func (f *fixture) kubeletRestarted(name string) {
	f.t.Helper()
	f.kubeletDone(name)
	f.updateStatus(name, func(p *corev1.Pod) {
		cs := &p.Status.ContainerStatuses[0]
		cs.RestartCount++
		cs.Ready = false
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Error", ExitCode: 137, FinishedAt: metav1.NewTime(f.clock.Now())}}
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady {
				c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(f.clock.Now())
			}
		}
	})
}

// recommendWeb writes a new recommendation for the web VPA's container.
func (f *fixture) recommendWeb(cpu, mem string) {
	f.t.Helper()
	v := f.getVPA("web")
	v.Status.Recommendation = inPlaceVPA(cpu, mem).Status.Recommendation
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").UpdateStatus(f.ctx, v, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool {
		t := v.Status.Recommendation.ContainerRecommendations[0].Target
		return t.Cpu().String() == cpu && t.Memory().String() == mem
	})
}

// podCPU is the cpu request of the pod's container, as the API server
// holds it.
func (f *fixture) podCPU(name string) string {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return p.Spec.Containers[0].Resources.Requests.Cpu().String()
}

// A memory decrease under resizePolicy RestartContainer restarts the
// container; an app that needs 90 s to pass its readiness probe is not
// harmed by it (on 273c770: "not Ready for 1m30s (grace 1m0s)", reverted,
// held). One that never becomes Ready again is.
func TestARestartingDecreaseOfASlowStarterIsNotReverted(t *testing.T) {
	start := func(t *testing.T) *fixture {
		f := newFixture(t, restartingPods(1), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{})
		require.NoError(t, f.sync("p0"))
		require.Equal(t, []string{"p0"}, f.resizedPods())
		f.clock.Step(2 * time.Second)
		f.kubeletRestarted("p0")
		require.NoError(t, f.sync("p0"))
		require.True(t, f.ctrl.watcher.Watching("uid-p0"))
		return f
	}
	t.Run("Ready after 90 s", func(t *testing.T) {
		f := start(t)
		for range 3 {
			f.clock.Step(30 * time.Second)
			require.NoError(t, f.sync("p0"))
		}
		f.setReady("p0", true)
		require.NoError(t, f.sync("p0"))
		f.clock.Step(observationWindowDefault)
		require.NoError(t, f.sync("p0"))
		assert.False(t, f.ctrl.watcher.Watching("uid-p0"), "watched for its window")
		assert.Equal(t, []string{"p0"}, f.resizedPods(), "not reverted")
		assert.Equal(t, "50Mi", f.podMemory("p0"))
		assert.False(t, containsPrefix(f.events(), "Pod/p0 Warning "+report.EventResizeHarmed))
		_, held := f.ctrl.canaries.Hold(webOwner)
		assert.False(t, held)
	})
	t.Run("never Ready again", func(t *testing.T) {
		f := start(t)
		f.clock.Step(observationWindowDefault - time.Second)
		require.NoError(t, f.sync("p0"))
		assert.Equal(t, []string{"p0"}, f.resizedPods(), "within its window")
		f.clock.Step(time.Second)
		require.NoError(t, f.sync("p0"))
		assert.Equal(t, []string{"p0", "p0"}, f.resizedPods(), "reverted at its window's end")
		assert.Equal(t, "100Mi", f.podMemory("p0"))
		assert.True(t, containsPrefix(f.events(), "Pod/p0 Warning "+report.EventResizeHarmed+" Pod not Ready again after the restart its resize caused"))
		_, held := f.ctrl.canaries.Hold(webOwner)
		assert.True(t, held)
	})
	t.Run("restarted once more", func(t *testing.T) {
		f := start(t)
		f.clock.Step(time.Minute)
		f.oomKilled("p0")
		require.NoError(t, f.sync("p0"))
		assert.Equal(t, []string{"p0", "p0"}, f.resizedPods(), "reverted")
	})
}

// A later resize does not replace the watch of a decrease: memory lowered,
// two minutes later CPU raised, a minute after that the container
// OOM-killed. The memory decrease is reverted and held (on 273c770:
// "which lowered nothing: reported, not reverted").
func TestALaterIncreaseKeepsTheWatchOfADecrease(t *testing.T) {
	f := newFixture(t, webPods(1), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p0"))
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	f.clock.Step(2 * time.Minute)
	f.recommendWeb("200m", "50Mi")
	require.NoError(t, f.sync("p0"))
	require.Equal(t, []string{"p0", "p0"}, f.resizedPods())
	require.Equal(t, "200m", f.podCPU("p0"))
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	f.clock.Step(time.Minute)
	f.oomKilled("p0")
	f.events()
	require.NoError(t, f.sync("p0"))

	assert.Equal(t, []string{"p0", "p0", "p0"}, f.resizedPods(), "reverted in place")
	assert.Equal(t, "100Mi", f.podMemory("p0"), "memory back to what it was")
	assert.Equal(t, "200m", f.podCPU("p0"), "the increase stays")
	ev := f.events()
	assert.True(t, containsPrefix(ev, "Pod/p0 Warning "+report.EventResizeHarmed+" Container c OOMKilled"), "%v", ev)
	assert.True(t, containsPrefix(ev, "Pod/p0 Warning "+report.EventResizeReverted), "%v", ev)
	hold, ok := f.ctrl.canaries.Hold(webOwner)
	require.True(t, ok, "the decrease is held")
	assert.Equal(t, "c: requests memory=50Mi", hold.Attempted.String())
}

// A canary's decrease keeps its watch, its window and its role across a
// later increase: the others follow when its own window ends, and harm
// after the increase reverts it and holds the values; the round never
// stalls (on 273c770 the increase's watch replaced the canary's: the
// others waited for its end, and harm after it was only reported).
func TestACanaryKeepsItsWatchAcrossALaterIncrease(t *testing.T) {
	const window = 4 * time.Minute
	start := func(t *testing.T) *fixture {
		f := newFixture(t, webPods(4), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{observationWindow: window})
		for i := range 4 {
			require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
		}
		require.Equal(t, []string{"p0"}, f.resizedPods())
		f.kubeletDone("p0")
		require.NoError(t, f.sync("p0"))
		f.clock.Step(2 * time.Minute)
		f.recommendWeb("200m", "50Mi")
		for i := range 4 {
			require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
		}
		require.Equal(t, "200m", f.podCPU("p0"))
		require.Equal(t, "50Mi", f.podMemory("p0"))
		for i := 1; i < 4; i++ {
			require.Equal(t, "200m", f.podCPU(fmt.Sprintf("p%d", i)), "increases go at once")
			require.Equal(t, "100Mi", f.podMemory(fmt.Sprintf("p%d", i)), "the decrease waits for the canary")
		}
		f.kubeletDone("p0")
		require.NoError(t, f.sync("p0"))
		f.queued()
		return f
	}
	t.Run("passed at its own window's end", func(t *testing.T) {
		f := start(t)
		f.clock.Step(2 * time.Minute)
		require.NoError(t, f.sync("p0"))
		assert.Subset(t, f.queued(), []string{"default/p1", "default/p2", "default/p3"}, "the others go when the canary's window ends")
		for i := 1; i < 4; i++ {
			require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
			assert.Equal(t, "50Mi", f.podMemory(fmt.Sprintf("p%d", i)))
		}
	})
	t.Run("harmed after the increase", func(t *testing.T) {
		f := start(t)
		f.clock.Step(time.Minute)
		f.oomKilled("p0")
		require.NoError(t, f.sync("p0"))
		assert.Equal(t, "100Mi", f.podMemory("p0"), "the canary is reverted")
		_, held := f.ctrl.canaries.Hold(webOwner)
		require.True(t, held)
		assert.Subset(t, f.queued(), []string{"default/p1", "default/p2", "default/p3"}, "the others are decided again")
		for i := 1; i < 4; i++ {
			require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
			assert.Equal(t, state.PodHeldAfterHarm, f.stateOfPod(fmt.Sprintf("p%d", i)).State, "not waiting for ever")
			assert.Equal(t, "100Mi", f.podMemory(fmt.Sprintf("p%d", i)))
		}
	})
}

// durableSafetyKey is the VPA annotation the safety records of a fixture
// with durableSafety are written to.
const durableSafetyKey = "vpa-inplace.dev/safety-records"

// runSafetyStore runs the writer of the fixture's safety store until stop.
func (f *fixture) runSafetyStore() (stop func()) {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.ctrl.safetyStore.Run(ctx) }()
	return func() { cancel(); <-done }
}

// restarted is the updater after a restart or a change of leader: a new
// controller on the same cluster and the same safety records.
func (f *fixture) restarted(o fixtureOpts) *fixture {
	f.t.Helper()
	g := newFixtureOn(f.t, f.kube, f.vpa, o)
	if o.durableSafety {
		require.NoError(f.t, g.ctrl.safetyStore.Load(g.ctx))
	}
	return g
}

// Every open watch of a decrease is a record: a single-pod VPA's, a VPA's
// with canary off, a pod's lowered after its canary passed. The updater
// restarted inside the window, an OOM kill afterwards is reverted and held
// (on 273c770 only canaries' watches survived).
func TestTheWatchOfADecreaseSurvivesARestart(t *testing.T) {
	off := inPlaceVPA("100m", "50Mi")
	off.Annotations = map[string]string{"vpa-inplace.dev/canary": "off"}
	for _, tt := range []struct {
		name    string
		pods    int
		vpa     *vpatypes.VerticalPodAutoscaler
		durable bool
	}{
		{"a single-pod VPA", 1, inPlaceVPA("100m", "50Mi"), false},
		{"a single-pod VPA, its records written and read back", 1, inPlaceVPA("100m", "50Mi"), true},
		{"canary off", 3, off, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			safety := records.Store(records.NewInMemoryStore())
			o := fixtureOpts{safety: safety, durableSafety: tt.durable}
			if tt.durable {
				o.safety = nil
			}
			f := newFixture(t, webPods(tt.pods), []*vpatypes.VerticalPodAutoscaler{tt.vpa}, o)
			for i := range tt.pods {
				require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
			}
			require.Len(t, f.resizedPods(), tt.pods)
			f.kubeletDone("p0")
			require.NoError(t, f.sync("p0"))
			r, ok := f.ctrl.safetyStore.Get("uid-p0")
			require.True(t, ok, "the watch is a record")
			require.Equal(t, records.KindWatch, r.Kind)
			require.NotNil(t, r.Watch)
			assert.Equal(t, "c: requests memory=50Mi", r.Attempted.String())
			if tt.durable {
				stop := f.runSafetyStore()
				require.Eventually(t, func() bool {
					return f.getVPA("web").Annotations[durableSafetyKey] != ""
				}, waitFor, every, "written")
				stop()
			}

			// Restarted 30 s later (each controller has its clock, from
			// t0); OOM-killed a minute after that.
			g := f.restarted(o)
			g.clock.Step(90 * time.Second)
			g.oomKilled("p0")
			require.NoError(t, g.sync("p0"))
			assert.Equal(t, "100Mi", g.podMemory("p0"), "reverted in place")
			assert.True(t, containsPrefix(g.events(), "Pod/p0 Warning "+report.EventResizeReverted))
			hold, held := g.ctrl.canaries.Hold(webOwner)
			require.True(t, held, "and held")
			assert.Equal(t, "c: requests memory=50Mi", hold.Attempted.String())
		})
	}
	t.Run("a pod lowered after its canary passed", func(t *testing.T) {
		safety := records.NewInMemoryStore()
		f := newFixture(t, webPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{safety: safety})
		require.NoError(t, f.sync("p0"))
		require.NoError(t, f.sync("p1"))
		require.Equal(t, []string{"p0"}, f.resizedPods())
		f.kubeletDone("p0")
		require.NoError(t, f.sync("p0"))
		f.clock.Step(observationWindowDefault)
		require.NoError(t, f.sync("p0"))
		require.NoError(t, f.sync("p1"))
		require.Equal(t, []string{"p0", "p1"}, f.resizedPods())
		f.kubeletDone("p1")
		require.NoError(t, f.sync("p1"))

		g := f.restarted(fixtureOpts{safety: safety})
		g.clock.Step(observationWindowDefault + time.Minute)
		g.oomKilled("p1")
		require.NoError(t, g.sync("p1"))
		assert.Equal(t, "100Mi", g.podMemory("p1"), "reverted in place")
		_, held := g.ctrl.canaries.Hold(webOwner)
		assert.True(t, held)
	})
}

// Harm while no updater runs: the canary OOM-killed within its window,
// which ended before the updater came back. It is judged from the pod's
// status before anything passes: reverted and held, and the decrease goes
// to no other pod (on 273c770 the canary was passed at load, without a
// look, and the others lowered).
func TestHarmWhileNoUpdaterRunsIsNotPassed(t *testing.T) {
	safety := records.NewInMemoryStore()
	f := newFixture(t, webPods(4), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{safety: safety})
	for i := range 4 {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	require.Equal(t, []string{"p0"}, f.resizedPods())
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	r, ok := safety.Get("uid-p0")
	require.True(t, ok)
	require.Equal(t, records.KindCanary, r.Kind)
	require.NotNil(t, r.Watch, "the canary's record keeps its watch")
	assert.Equal(t, map[string]int32{"c": 0}, r.Watch.Restarts, "and the restart counts no harm is above")

	// The updater stops; the canary is OOM-killed within its window; the
	// updater comes back after the window ended.
	f.clock.Step(3 * time.Minute)
	f.oomKilled("p0")
	g := f.restarted(fixtureOpts{safety: safety})
	g.clock.Step(observationWindowDefault + time.Hour)
	for i := 1; i < 4; i++ {
		require.NoError(t, g.sync(fmt.Sprintf("p%d", i)))
	}
	require.NoError(t, g.sync("p0"))
	assert.Equal(t, "100Mi", g.podMemory("p0"), "the canary is reverted")
	_, held := g.ctrl.canaries.Hold(webOwner)
	require.True(t, held)
	for i := 1; i < 4; i++ {
		require.NoError(t, g.sync(fmt.Sprintf("p%d", i)))
		assert.Equal(t, "100Mi", g.podMemory(fmt.Sprintf("p%d", i)), "no other pod gets the decrease")
	}
	assert.Equal(t, []string{"p0", "p0"}, f.resizedPods())

	t.Run("without harm it passes, once looked at", func(t *testing.T) {
		safety := records.NewInMemoryStore()
		f := newFixture(t, webPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{safety: safety})
		require.NoError(t, f.sync("p0"))
		f.kubeletDone("p0")
		require.NoError(t, f.sync("p0"))
		g := f.restarted(fixtureOpts{safety: safety})
		g.clock.Step(observationWindowDefault + time.Hour)
		require.NoError(t, g.sync("p1"))
		assert.Equal(t, state.PodCanaryWait, g.stateOfPod("p1").State, "not before the canary was looked at")
		require.NoError(t, g.sync("p0"))
		assert.Contains(t, g.queued(), "default/p1")
		require.NoError(t, g.sync("p1"))
		assert.Equal(t, "50Mi", g.podMemory("p1"))
	})
}

// The records of a watch follow it: the watch of a raise is none, a
// revert due replaces it, a watch over leaves none.
func TestWatchRecordsFollowTheWatch(t *testing.T) {
	f := newFixture(t, webPods(1), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p0"))
	r, ok := f.ctrl.safetyStore.Get("uid-p0")
	require.True(t, ok, "a decrease under way is a record")
	assert.Zero(t, r.Watch.Began)
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	r, _ = f.ctrl.safetyStore.Get("uid-p0")
	assert.Equal(t, t0, r.Watch.Began)
	f.clock.Step(observationWindowDefault)
	require.NoError(t, f.sync("p0"))
	_, ok = f.ctrl.safetyStore.Get("uid-p0")
	assert.False(t, ok, "the watch is over: its record goes")

	f.recommendWeb("100m", "200Mi")
	require.NoError(t, f.sync("p0"))
	require.True(t, f.ctrl.watcher.Watching("uid-p0"))
	_, ok = f.ctrl.safetyStore.Get("uid-p0")
	assert.False(t, ok, "an increase is watched in memory only: harm after it is reported")
}

// A decrease's window ending while a later resize is under way: the pod
// is looked at again when that resize's update comes, not at once in a
// loop.
func TestAWindowEndingWhileAResizeIsUnderWayQueuesNoLoop(t *testing.T) {
	f := newFixture(t, webPods(1), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p0"))
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	f.clock.Step(observationWindowDefault - time.Minute)
	f.recommendWeb("200m", "50Mi")
	require.NoError(t, f.sync("p0"))
	require.Equal(t, "200m", f.podCPU("p0"), "sent, not applied yet")
	f.updateStatus("p0", func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue})
	})
	f.clock.Step(time.Minute)
	before := len(f.podQueue.asked("default/p0"))
	require.NoError(t, f.sync("p0"))
	assert.NotContains(t, f.podQueue.asked("default/p0")[before:], time.Duration(0))
	assert.True(t, f.ctrl.watcher.Watching("uid-p0"), "the increase under way is still watched")
}
