package updater

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// restartedPod is a pod whose container c (cpu request cpu) restarted
// restarts times, its running instance started at t0 and the pod Ready
// again since readySince (not Ready when zero); its startup boost is over
// (no annotation).
func restartedPod(name, cpu string, restarts int32, readySince time.Time) *corev1.Pod {
	pod := webPod(name).Running().Obj()
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = testpod.List(cpu, "")[corev1.ResourceCPU]
	pod = webPodLike(pod)
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	st := &pod.Status.ContainerStatuses[0]
	st.RestartCount = restarts
	st.State.Running.StartedAt = metav1.NewTime(t0)
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			pod.Status.Conditions[i].LastTransitionTime = metav1.NewTime(readySince)
			if readySince.IsZero() {
				pod.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	}
	return pod
}

// crash is the kubelet restarting container c: one more restart, a new
// instance started now, Ready again now.
func crash(now time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		st := &p.Status.ContainerStatuses[0]
		st.RestartCount++
		st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
			}
		}
	}
}

func eventsWith(events []string, reason string) []string {
	var out []string
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			out = append(out, e)
		}
	}
	return out
}

// The whole cycle: a container that restarts after its startup boost gets
// its boost again in place, keeps it while it lasts, and goes back to the
// recommendation when the pod has been Ready for the boost's duration,
// although the reversal hold would hold an ordinary move back.
func TestARestartedContainerIsBoostedAgainThenUnboosted(t *testing.T) {
	pod := restartedPod("p", "150m", 1, t0.Add(2*time.Second))
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)},
		fixtureOpts{boost: true, boostMaxRestarts: 3, reversalHold: 15 * time.Minute})
	f.clock.SetTime(t0.Add(3 * time.Second))

	require.NoError(t, f.sync("p"))
	require.Equal(t, []string{`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"100Mi"}}}]}}`}, f.resizePatches(),
		"boosted again, in place, as at startup: the recommendation x 2")
	after, ok := f.podQueue.of("default/p")
	require.True(t, ok, "a timer for the boost's end")
	assert.Equal(t, 19*time.Second, after, "Ready + durationSeconds")
	events := f.events()
	assert.Contains(t, events, "Pod/p Normal "+report.EventStartupBoostReapplied+
		" CPU startup boost of c applied again after its restart 1 (at most 3 are boosted): resized in place to c: requests cpu=300m memory=100Mi")
	assert.Equal(t, 1.0, counter(t, f, report.MetricRestartBoosts, "outcome", report.RestartBoostBoosted))

	f.kubeletOn("p", actuate)
	f.clock.Step(10 * time.Second)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "boosted: not resized while the boost lasts")
	assert.Equal(t, string(state.PodBoosted), f.podState("p"))
	require.NoError(t, f.syncStatus("web"))
	assert.Equal(t, "1 pod: 1 boosted at startup.", f.condition("web").Message)
	assert.Equal(t, 1.0, gauge(t, f, report.MetricStartupBoosts, nil))

	f.clock.Step(9 * time.Second)
	require.NoError(t, f.sync("p"))
	patches := f.resizePatches()
	require.Len(t, patches, 2)
	assert.Equal(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"150m","memory":"100Mi"}}}]}}`, patches[1],
		"exactly at Ready + durationSeconds, back to the recommendation; not held as a reversal")
	assert.Contains(t, f.events(), "Pod/p Normal "+report.EventStartupBoostEnded+
		" CPU boost of c after its restart 1 ended: resized in place to c: requests cpu=150m memory=100Mi")
	assert.Equal(t, 1.0, counter(t, f, report.MetricRestartBoosts, "outcome", report.RestartBoostEnded))

	f.kubeletOn("p", actuate)
	f.clock.Step(time.Minute)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 2, "up to date: nothing more")
	assert.Equal(t, string(state.PodResized), f.podState("p"))

	// It crashes again: boosted again.
	f.kubeletOn("p", crash(f.clock.Now()))
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 3)
	assert.Contains(t, f.resizePatches()[2], `"cpu":"300m"`)
}

// A restart is news to the updater although the pod stayed Ready: the
// kubelet may restart a container before any probe fails, and the boost is
// due then.
func TestARestartQueuesThePod(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{restartedPod("p", "150m", 1, t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)},
		fixtureOpts{boost: true, boostMaxRestarts: 3})
	f.queued() // the pod's own add event
	f.kubeletOn("p", func(p *corev1.Pod) {
		st := &p.Status.ContainerStatuses[0]
		st.RestartCount++
		st.State.Running.StartedAt = metav1.NewTime(t0.Add(time.Minute))
	})
	require.Eventually(t, func() bool { return slices.Contains(f.queued(), "default/p") }, waitFor, every, "queued on the restart")
}

// Nothing is remembered but the pod: a new leader neither boosts a boosted
// container twice nor takes its boost back early, and ends it on time.
func TestABoostAfterARestartIsCarriedOnByANewLeader(t *testing.T) {
	pod := restartedPod("p", "150m", 1, t0)
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 60)}, fixtureOpts{boost: true, boostMaxRestarts: 3})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	f.kubeletOn("p", actuate)

	g := newFixtureOn(t, f.kube, f.vpa, fixtureOpts{boost: true, boostMaxRestarts: 3})
	g.clock.SetTime(t0.Add(30 * time.Second))
	f.kube.ClearActions()
	require.NoError(t, g.sync("p"))
	assert.Empty(t, g.resizePatches(), "already boosted, and the boost lasts")
	after, ok := g.podQueue.of("default/p")
	require.True(t, ok)
	assert.Equal(t, 30*time.Second, after)

	g.clock.Step(30 * time.Second)
	require.NoError(t, g.sync("p"))
	require.Len(t, g.resizePatches(), 1)
	assert.Contains(t, g.resizePatches()[0], `"cpu":"150m"`)
}

// The timer runs on the queue's clock: nothing but the clock reaching the
// boost's end brings the pod back.
func TestTheEndOfABoostAfterARestartFiresOnTheQueuesClock(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{restartedPod("p", "150m", 1, t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)},
		fixtureOpts{boost: true, boostMaxRestarts: 3})
	require.NoError(t, f.sync("p"))
	f.kubeletOn("p", actuate)
	f.queued() // the pod's own events

	f.clock.Step(19 * time.Second)
	assert.NotContains(t, f.queued(), "default/p", "not due yet")
	f.stepUntil(time.Second, func() bool { return slices.Contains(f.queued(), "default/p") }, "due on the queue's clock")
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 2)
	assert.Contains(t, f.resizePatches()[1], `"cpu":"150m"`)
}

// A container restarting more often than the bound is not boosted: it gets
// the recommendation as any pod, and the back-off is said on the pod and
// the VPA (once), in the condition and in the metric.
func TestRestartsBeyondTheBoundAreNotBoosted(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{restartedPod("p", "150m", 4, t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 60)},
		fixtureOpts{boost: true, boostMaxRestarts: 3})
	for range 2 {
		require.NoError(t, f.sync("p"))
	}
	assert.Empty(t, f.resizePatches(), "not boosted: it has its recommendation")
	assert.Equal(t, string(state.PodBoostBackedOff), f.podState("p"))
	want := "c restarted 4 times, more than 3 (--startup-boost-max-restarts): its restarts are not boosted any more in this pod"
	assert.Equal(t, []string{"Pod/p Warning " + report.EventStartupBoostBackedOff + " CPU startup boost backed off: " + want},
		eventsWith(f.events(), report.EventStartupBoostBackedOff), "once")
	assert.Equal(t, []string{"VerticalPodAutoscaler/web Warning " + report.EventStartupBoostBackedOff + " Pod p: CPU startup boost backed off: " + want},
		eventsWith(f.vpaEvents(), report.EventStartupBoostBackedOff))
	assert.Equal(t, 1.0, counter(t, f, report.MetricRestartBoosts, "outcome", report.RestartBoostBackedOff))
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	assert.Equal(t, "False", string(c.Status), "a back-off blocks no resize")
	assert.Equal(t, "1 pod: 1 not boosted after repeated restarts. Startup boost backed off: in p, c restarted 4 times, more than 3: its restarts are not boosted.", c.Message)

	// Once what would have been its boost is over, the pod is just resized:
	// a timer brings it back then.
	after, ok := f.podQueue.of("default/p")
	require.True(t, ok, "a timer for the end of what would have been its boost")
	assert.Equal(t, time.Minute, after)
	f.clock.Step(time.Minute)
	require.NoError(t, f.sync("p"))
	assert.Equal(t, string(state.PodResized), f.podState("p"))
}

// A container boosted at its last boosted restart that crashes once more
// is taken back to its recommendation at once.
func TestABoostIsTakenBackWhenTheContainerGoesBeyondTheBound(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{restartedPod("p", "150m", 3, t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 600)},
		fixtureOpts{boost: true, boostMaxRestarts: 3, reversalHold: 15 * time.Minute})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	f.kubeletOn("p", actuate)

	f.clock.Step(5 * time.Second)
	f.kubeletOn("p", crash(f.clock.Now()))
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 2)
	assert.Contains(t, f.resizePatches()[1], `"cpu":"150m"`, "restart 4: its boost goes, not held as a reversal")
	assert.Len(t, eventsWith(f.events(), report.EventStartupBoostBackedOff), 1)
}

func TestRestartsAreNotBoostedWithoutTheGateOrTheSetting(t *testing.T) {
	for name, o := range map[string]fixtureOpts{
		"gate off":                       {boostMaxRestarts: 3},
		"--startup-boost-max-restarts=0": {boost: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{restartedPod("p", "150m", 1, t0)}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 60)}, o)
			require.NoError(t, f.sync("p"))
			assert.Empty(t, f.resizePatches())
			assert.Equal(t, string(state.PodResized), f.podState("p"))
			assert.Empty(t, eventsWith(f.events(), report.EventStartupBoostBackedOff))
		})
	}
}

// While the pod is not Ready again the boost lasts, with no timer: the
// Ready transition brings the pod back.
func TestABoostAfterARestartLastsUntilThePodIsReady(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{restartedPod("p", "300m", 1, time.Time{})}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)},
		fixtureOpts{boost: true, boostMaxRestarts: 3})
	for range 3 {
		require.NoError(t, f.sync("p"))
		f.clock.Step(time.Hour)
	}
	assert.Empty(t, f.resizePatches())
	assert.Zero(t, f.podQueue.count("default/p"))
	assert.Equal(t, string(state.PodBoosted), f.podState("p"))
}

func TestContainerRestarted(t *testing.T) {
	base := restartedPod("p", "150m", 1, t0)
	tests := []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"nothing", func(*corev1.Pod) {}, false},
		{"Ready again: not a restart", func(p *corev1.Pod) { p.Status.Conditions = nil }, false},
		{"the restart count", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++ }, true},
		{"a new instance running", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0.Add(time.Second))
		}, true},
		{"waiting to restart", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		}, true},
		{"a container appears", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "new"})
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := base.DeepCopy()
			tt.change(pod)
			assert.Equal(t, tt.want, containerRestarted(base, pod))
		})
	}
}

// The end of a boost after a restart is no new decrease: it does not wait
// for the VPA's canary, here another pod whose decrease is still watched.
func TestTheEndOfABoostAfterARestartDoesNotWaitForTheCanary(t *testing.T) {
	p := restartedPod("p", "150m", 1, t0.Add(2*time.Second))
	q := restartedPod("q", "200m", 0, t0)
	f := newFixture(t, []*corev1.Pod{p, q}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)},
		fixtureOpts{boost: true, boostMaxRestarts: 3})
	f.clock.SetTime(t0.Add(3 * time.Second))

	require.NoError(t, f.sync("q"))
	require.Len(t, f.resizePatches(), 1, "q lowered first: the VPA's canary")
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 2, "p boosted again after its restart")
	assert.Contains(t, f.resizePatches()[1], `"cpu":"300m"`)

	f.kubeletOn("p", actuate)
	f.clock.Step(19 * time.Second)
	require.NoError(t, f.sync("p"))
	patches := f.resizePatches()
	require.Len(t, patches, 3, "the boost ends on time, whatever the canary: %s", f.podState("p"))
	assert.Contains(t, patches[2], `"cpu":"150m"`)
}

// The end of a boost after a restart lowers CPU by design, back to the
// recommendation: it is no decrease to watch. Harm after it (the next
// crash) is reported, never reverted nor held for the VPA, and fires no
// revert alert; the crash is boosted again as any other.
func TestHarmAfterTheEndOfABoostAfterARestartIsOnlyReported(t *testing.T) {
	pod := restartedPod("p", "150m", 1, t0.Add(2*time.Second))
	safety := records.NewInMemoryStore()
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{boostVPA("150m", 20)},
		fixtureOpts{boost: true, boostMaxRestarts: 3, safety: safety})
	f.clock.SetTime(t0.Add(3 * time.Second))
	require.NoError(t, f.sync("p"))
	f.kubeletOn("p", actuate)
	f.clock.Step(19 * time.Second)
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 2)
	require.Contains(t, f.resizePatches()[1], `"cpu":"150m"`, "the boost ends")
	f.kubeletOn("p", actuate)
	f.clock.Step(time.Minute)
	require.NoError(t, f.sync("p"))
	f.events()
	f.vpaEvents()

	f.kubeletOn("p", crash(f.clock.Now()))
	require.NoError(t, f.sync("p"))
	_, held := f.ctrl.canaries.Hold(webOwner)
	assert.False(t, held, "the VPA's recommendation is not held")
	for uid, r := range safety.Of(webOwner) {
		assert.NotEqual(t, records.KindRevert, r.Kind, "no revert due for %s", uid)
	}
	events := f.events()
	assert.Empty(t, eventsWith(events, report.EventResizeReverted), "%v", events)
	harmed := eventsWith(events, report.EventResizeHarmed)
	require.Len(t, harmed, 1, "%v", events)
	assert.Contains(t, harmed[0], "after the resize to c: requests cpu=150m memory=100Mi, which started or ended a CPU boost: reported, not reverted")
	assert.Empty(t, eventsWith(f.vpaEvents(), report.EventResizeReverted))
	assert.InDelta(t, 0, counter(t, f, report.MetricReverts), 0)
	require.Len(t, f.resizePatches(), 3)
	assert.Contains(t, f.resizePatches()[2], `"cpu":"300m"`, "the crash is boosted again")
	assert.Len(t, eventsWith(events, report.EventStartupBoostReapplied), 1, "%v", events)
}
