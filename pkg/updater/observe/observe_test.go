package observe

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testheap"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

var t0 = time.Date(2026, 11, 26, 12, 30, 0, 0, time.UTC)

const (
	window = 10 * time.Minute
	grace  = time.Minute
)

// lowered is a pod whose memory a resize lowered from 2Gi to 1Gi.
func lowered() Resize {
	return Resize{VPA: "default/web", VPAUID: "uid-web", Name: "p",
		From: resources.Resources{"app": {Requests: testpod.List("1", "2Gi")}},
		To:   resources.Resources{"app": {Requests: testpod.List("1", "1Gi")}}, Window: window}
}

// podAt is the pod with the resize completed, or with it under way
// (generation 2 not observed yet).
func podAt(completed bool) *corev1.Pod {
	p := testpod.New("p").Container("app", "1", "1Gi").Generation(2).Running().Obj()
	if !completed {
		p.Status.ObservedGeneration = 1
	}
	return p
}

func newWatcher() (*Watcher, *testingclock.FakeClock) {
	clk := testingclock.NewFakeClock(t0)
	return New(Config{NotReadyGrace: grace}, clk), clk
}

func TestWatchBeginsWhenTheResizeCompletesAndPassesAtTheWindowsEnd(t *testing.T) {
	w, clk := newWatcher()
	w.Sent("uid-p", lowered())
	look, ok := w.Observe(podAt(false))
	require.True(t, ok)
	assert.Equal(t, StatePending, look.State, "under way: not watched yet")
	assert.Zero(t, look.After, "the pod's next update brings it back")

	clk.Step(5 * time.Second)
	look, _ = w.Observe(podAt(true))
	assert.Equal(t, StateWatching, look.State)
	assert.True(t, look.Started)
	assert.Equal(t, t0.Add(5*time.Second), look.Since, "from when it was seen completed")
	assert.Equal(t, window, look.After, "looked at again when the window ends")

	clk.Step(window - time.Second)
	look, _ = w.Observe(podAt(true))
	assert.Equal(t, StateWatching, look.State)
	assert.Equal(t, time.Second, look.After)
	assert.False(t, look.Started)

	assert.Nil(t, look.Resize.To, "while watching, the values stay compact")
	assert.Equal(t, "p", look.Resize.Name)

	clk.Step(time.Second)
	look, _ = w.Observe(podAt(true))
	assert.Equal(t, StatePassed, look.State)
	require.Len(t, look.Passed, 1)
	assert.Equal(t, "app: requests memory=2Gi", look.Passed[0].From.String(), "the look that ends the watch has the values lowered")
	assert.Equal(t, "app: requests memory=1Gi", look.Passed[0].To.String())
	assert.Equal(t, t0.Add(5*time.Second), look.Passed[0].Since)
	assert.True(t, look.Passed[0].Lowers())
	assert.True(t, look.Over)
	assert.False(t, w.Watching("uid-p"), "the watch is over")
	_, ok = w.Observe(podAt(true))
	assert.False(t, ok)
}

func TestHarmWithinTheWindow(t *testing.T) {
	oom := func(p *corev1.Pod) {
		s := &p.Status.ContainerStatuses[0]
		s.RestartCount++
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(t0.Add(time.Minute))}
	}
	t.Run("an OOM kill", func(t *testing.T) {
		w, clk := newWatcher()
		w.Sent("uid-p", lowered())
		w.Observe(podAt(true))
		clk.Step(time.Minute)
		p := podAt(true)
		oom(p)
		look, _ := w.Observe(p)
		assert.Equal(t, StateHarmed, look.State)
		assert.Equal(t, resize.HarmOOMKilled, look.Harm.Kind)
		assert.Equal(t, "app", look.Harm.Container)
		assert.True(t, look.Resize.Lowers())
		assert.False(t, w.Watching("uid-p"))
	})
	t.Run("a restart before the resize completed is not its harm", func(t *testing.T) {
		w, _ := newWatcher()
		w.Sent("uid-p", lowered())
		p := podAt(true)
		oom(p) // restarted by a resize that restarts its container
		look, _ := w.Observe(p)
		assert.Equal(t, StateWatching, look.State)
	})
	t.Run("an OOM kill after the resize was sent, seen with its completion, is its harm", func(t *testing.T) {
		w, _ := newWatcher()
		r := lowered()
		r.Before = resize.BaselineOf(podAt(true))
		w.Sent("uid-p", r)
		p := podAt(true)
		oom(p)
		look, _ := w.Observe(p)
		assert.Equal(t, StateHarmed, look.State)
		assert.Equal(t, resize.HarmOOMKilled, look.Harm.Kind)
	})
	t.Run("a restart by a resize that restarts containers is not its harm", func(t *testing.T) {
		w, _ := newWatcher()
		r := lowered()
		r.Before = resize.BaselineOf(podAt(true))
		w.Sent("uid-p", r)
		p := podAt(true)
		s := &p.Status.ContainerStatuses[0]
		s.RestartCount++
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 137, FinishedAt: metav1.NewTime(t0)}
		look, _ := w.Observe(p)
		assert.Equal(t, StateWatching, look.State)
	})
	t.Run("a later raise does not end the watch of the values lowered before", func(t *testing.T) {
		w, clk := newWatcher()
		w.Sent("uid-p", lowered())
		w.Observe(podAt(true))
		clk.Step(time.Minute)
		again := lowered()
		again.From = again.To
		again.To = resources.Resources{"app": {Requests: testpod.List("2", "1Gi")}}
		w.Sent("uid-p", again)
		p := testpod.New("p").Container("app", "2", "1Gi").Generation(3).Running().Obj()
		look, _ := w.Observe(p)
		assert.Equal(t, StateWatching, look.State)
		assert.True(t, look.Started)
		assert.False(t, look.Resize.Canary)
		clk.Step(time.Minute)
		oom(p)
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated.FinishedAt = metav1.NewTime(clk.Now())
		look, _ = w.Observe(p)
		require.Equal(t, StateHarmed, look.State, "the memory still lowered keeps its watch")
		assert.Equal(t, "app: requests memory=2Gi", look.Resize.From.String())
		assert.Equal(t, "app: requests memory=1Gi", look.Resize.To.String())
		assert.True(t, w.Watching("uid-p"), "the raise is still watched, for its window")
	})
}

func TestNotReadyForLongerThanTheGrace(t *testing.T) {
	notReady := func(since time.Time) *corev1.Pod {
		p := podAt(true)
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(since)
		return p
	}
	w, clk := newWatcher()
	w.Sent("uid-p", lowered())
	w.Observe(podAt(true))
	clk.Step(2 * time.Minute)
	look, _ := w.Observe(notReady(t0.Add(2 * time.Minute)))
	assert.Equal(t, StateWatching, look.State)
	assert.Equal(t, grace, look.After, "looked at again when the grace runs out")

	clk.Step(30 * time.Second)
	look, _ = w.Observe(podAt(true))
	assert.Equal(t, StateWatching, look.State, "Ready again within the grace")
	assert.Equal(t, window-150*time.Second, look.After)

	clk.Step(30 * time.Second)
	look, _ = w.Observe(notReady(t0.Add(3 * time.Minute)))
	assert.Equal(t, grace, look.After, "a new grace")
	clk.Step(grace)
	look, _ = w.Observe(notReady(t0.Add(3 * time.Minute)))
	assert.Equal(t, StateHarmed, look.State)
	assert.Equal(t, resize.HarmNotReady, look.Harm.Kind)
	assert.Contains(t, look.Harm.Message, "not Ready for 1m0s")

	t.Run("not Ready since before the resize completed: counted from the completion", func(t *testing.T) {
		w, clk := newWatcher()
		w.Sent("uid-p", lowered())
		look, _ := w.Observe(notReady(t0.Add(-time.Hour)))
		assert.Equal(t, grace, look.After)
		clk.Step(grace)
		look, _ = w.Observe(notReady(t0.Add(-time.Hour)))
		assert.Equal(t, StateHarmed, look.State)
	})
	t.Run("no transition time: counted from when it was seen", func(t *testing.T) {
		w, clk := newWatcher()
		w.Sent("uid-p", lowered())
		w.Observe(podAt(true))
		clk.Step(time.Minute)
		look, _ := w.Observe(notReady(time.Time{}))
		assert.Equal(t, grace, look.After)
		clk.Step(grace - time.Second)
		look, _ = w.Observe(notReady(time.Time{}))
		assert.Equal(t, StateWatching, look.State)
		clk.Step(time.Second)
		look, _ = w.Observe(notReady(time.Time{}))
		assert.Equal(t, StateHarmed, look.State)
	})
}

func TestResizesNotAppliedEndTheirWatch(t *testing.T) {
	w, _ := newWatcher()
	w.Sent("uid-p", lowered())
	p := podAt(false)
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible})
	look, _ := w.Observe(p)
	assert.Equal(t, StateNotApplied, look.State)
	assert.False(t, w.Watching("uid-p"))

	w.Sent("uid-p", lowered())
	look, _ = w.Observe(testpod.New("p").Container("app", "1", "4Gi").Running().Obj())
	assert.Equal(t, StateNotApplied, look.State, "the spec holds other values")
}

func TestGone(t *testing.T) {
	w, _ := newWatcher()
	w.Sent("uid-p", lowered())
	_, _, harmed := w.Gone(podAt(false))
	assert.False(t, harmed, "gone before its resize completed")

	w.Sent("uid-p", lowered())
	w.Observe(podAt(true))
	p := podAt(true)
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
	r, h, harmed := w.Gone(p)
	assert.True(t, harmed)
	assert.Equal(t, resize.HarmEvicted, h.Kind)
	assert.Equal(t, "default/web", r.VPA)
	assert.Zero(t, w.Len())

	w.Sent("uid-p", lowered())
	w.Observe(podAt(true))
	_, _, harmed = w.Gone(podAt(true))
	assert.False(t, harmed, "deleted, not killed")
}

func TestRestoredWatch(t *testing.T) {
	saved := func(since time.Time, restarts resize.RestartCounts) Saved {
		to, from := resize.Lowered(lowered().From, lowered().To)
		return Saved{Began: since, Restarts: restarts, Lowered: []SavedLowering{{From: from, To: to, Since: since}}}
	}
	w, clk := newWatcher()
	w.Restore("uid-p", lowered(), window, saved(t0.Add(-8*time.Minute), resize.BaselineOf(podAt(true)).Counts()), podAt(true))
	look, _ := w.Observe(podAt(true))
	assert.Equal(t, StateWatching, look.State)
	assert.Equal(t, 2*time.Minute, look.After, "what is left of its window")
	w.Restore("uid-p", lowered(), window, saved(t0, nil), podAt(true))
	clk.Step(2 * time.Minute)
	look, _ = w.Observe(podAt(true))
	assert.Equal(t, StatePassed, look.State, "a watch held is kept")

	oom := func(p *corev1.Pod, at time.Time) *corev1.Pod {
		s := &p.Status.ContainerStatuses[0]
		s.RestartCount++
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(at)}
		return p
	}
	t.Run("harm while no updater ran is judged from the baseline kept", func(t *testing.T) {
		w, _ := newWatcher()
		began := t0.Add(-20 * time.Minute)
		w.Restore("uid-p", lowered(), window, saved(began, resize.BaselineOf(podAt(true)).Counts()), podAt(true))
		look, _ := w.Observe(oom(podAt(true), began.Add(5*time.Minute)))
		require.Equal(t, StateHarmed, look.State, "OOM-killed within its window, which ended meanwhile: not passed")
		assert.Equal(t, resize.HarmOOMKilled, look.Harm.Kind)
		assert.Equal(t, "app: requests memory=1Gi", look.Resize.To.String())
	})
	t.Run("harm after its window ended is not its harm", func(t *testing.T) {
		w, _ := newWatcher()
		began := t0.Add(-20 * time.Minute)
		w.Restore("uid-p", lowered(), window, saved(began, resize.BaselineOf(podAt(true)).Counts()), podAt(true))
		look, _ := w.Observe(oom(podAt(true), began.Add(15*time.Minute)))
		assert.Equal(t, StatePassed, look.State)
		assert.Len(t, look.Passed, 1)
	})
	t.Run("without counts, a termination after the watch began is harm", func(t *testing.T) {
		w, _ := newWatcher()
		began := t0.Add(-20 * time.Minute)
		p := oom(podAt(true), began.Add(-time.Hour))
		p.Status.ContainerStatuses[0].RestartCount = 7
		w.Restore("uid-p", lowered(), window, saved(began, nil), p)
		look, _ := w.Observe(p)
		assert.Equal(t, StatePassed, look.State, "a termination before it began is not")

		w.Restore("uid-p", lowered(), window, saved(began, nil), p)
		look, _ = w.Observe(oom(p, began.Add(time.Minute)))
		assert.Equal(t, StateHarmed, look.State)
	})
	t.Run("a resize under way when it was saved", func(t *testing.T) {
		w, clk := newWatcher()
		before := podAt(true)
		s := Saved{Restarts: resize.BaselineOf(before).Counts(), Lowered: []SavedLowering{{From: lowered().From, To: lowered().To, Canary: true}}}
		w.Restore("uid-p", lowered(), window, s, podAt(false))
		look, _ := w.Observe(podAt(false))
		assert.Equal(t, StatePending, look.State)
		clk.Step(time.Second)
		look, _ = w.Observe(oom(podAt(true), clk.Now()))
		assert.Equal(t, StateHarmed, look.State, "an OOM kill beyond what it showed when it was sent")
		assert.True(t, look.Resize.Canary)
	})
}

func TestSavedAndRestoredWatchesAreTheSame(t *testing.T) {
	w, clk := newWatcher()
	r := lowered()
	r.Canary = true
	r.Before = resize.BaselineOf(podAt(true))
	w.Sent("uid-p", r)
	s, ok := w.Saved("uid-p")
	require.True(t, ok, "a lowering under way is saved")
	assert.Zero(t, s.Began)
	require.Len(t, s.Lowered, 1)
	assert.True(t, s.Lowered[0].Canary)
	assert.Zero(t, s.Lowered[0].Since)
	assert.Equal(t, "app: requests memory=1Gi", s.Lowered[0].To.String())

	w.Observe(podAt(true))
	clk.Step(time.Minute)
	up := lowered()
	up.From, up.To = lowered().To, resources.Resources{"app": {Requests: testpod.List("2", "1Gi")}}
	w.Sent("uid-p", up)
	s, _ = w.Saved("uid-p")
	assert.Equal(t, t0, s.Began)
	require.Len(t, s.Lowered, 1, "a raise is not saved")
	assert.Equal(t, t0, s.Lowered[0].Since)

	other, _ := newWatcher()
	other.Restore("uid-p", lowered(), window, s, podAt(true))
	t2, _ := other.Saved("uid-p")
	assert.Equal(t, s, t2)

	w.Forget("uid-p")
	_, ok = w.Saved("uid-p")
	assert.False(t, ok)
}

// BenchmarkRetainedPerWatch measures the heap a watch keeps for its window:
// the Resize a pod's resize of one container's cpu and memory requests was
// sent as, with its from and to values, and its place in the watcher. The
// pods' names, UIDs and the VPA's are the caller's, shared.
func BenchmarkRetainedPerWatch(b *testing.B) {
	const n = 1000
	uids := make([]types.UID, n)
	names := make([]string, n)
	for i := range uids {
		uids[i], names[i] = types.UID(fmt.Sprintf("uid-%05d", i)), fmt.Sprintf("web-%05d", i)
	}
	var held float64
	for b.Loop() {
		held = float64(testheap.Held(func() any {
			w, _ := newWatcher()
			for i, uid := range uids {
				r := lowered()
				r.Name = names[i]
				w.Sent(uid, r)
			}
			return w
		})) / n
	}
	b.ReportMetric(held, "held-B/watch")
}

// restartingPod is the pod of a resize that restarts its container
// (memory: RestartContainer): restarted restarts, Ready or not since.
func restartingPod(restarts int32, ready bool, since time.Time) *corev1.Pod {
	p := testpod.New("p").Container("app", "1", "1Gi").ResizePolicy("app", corev1.ResourceMemory, corev1.RestartContainer).Generation(2).Running().Obj()
	s := &p.Status.ContainerStatuses[0]
	s.RestartCount = restarts
	if restarts > 0 {
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 137, FinishedAt: metav1.NewTime(t0)}
	}
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(since)
	if !ready {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		s.Ready = false
	}
	return p
}

// A restart the resize causes is no harm, nor the pod not Ready after it
// until it has been Ready once: a slow starter's 90 s. Never Ready again by
// the end of the window, or restarted once more, is harm.
func TestARestartTheResizeCausesIsNoHarm(t *testing.T) {
	sent := func(w *Watcher) {
		r := lowered()
		old := restartingPod(0, true, t0.Add(-time.Hour))
		r.Before = resize.BaselineOf(old)
		r.Restarts = resize.RestartedBy(old, r.From, r.To)
		require.Equal(t, []string{"app"}, r.Restarts)
		w.Sent("uid-p", r)
	}
	t.Run("a slow starter", func(t *testing.T) {
		w, clk := newWatcher()
		sent(w)
		// Completed as the kubelet first says it: the restart not shown yet.
		look, _ := w.Observe(restartingPod(0, true, t0.Add(-time.Hour)))
		require.True(t, look.Started)
		look, _ = w.Observe(restartingPod(1, false, t0))
		assert.Equal(t, StateWatching, look.State, "its own restart")
		clk.Step(90 * time.Second)
		look, _ = w.Observe(restartingPod(1, false, t0))
		assert.Equal(t, StateWatching, look.State, "not Ready for 1m30s after the restart: starting")
		assert.Equal(t, window-90*time.Second, look.After, "looked at again when its window ends")
		look, _ = w.Observe(restartingPod(1, true, clk.Now()))
		assert.Equal(t, StateWatching, look.State)
		clk.Step(time.Minute)
		look, _ = w.Observe(restartingPod(1, false, clk.Now()))
		assert.Equal(t, grace, look.After, "once Ready after it, the grace applies")
		clk.Step(grace)
		look, _ = w.Observe(restartingPod(1, false, clk.Now().Add(-grace)))
		assert.Equal(t, StateHarmed, look.State)
		assert.Equal(t, resize.HarmNotReady, look.Harm.Kind)
	})
	t.Run("never Ready again", func(t *testing.T) {
		w, clk := newWatcher()
		sent(w)
		look, _ := w.Observe(restartingPod(1, false, t0))
		require.True(t, look.Started)
		clk.Step(window - time.Second)
		look, _ = w.Observe(restartingPod(1, false, t0))
		assert.Equal(t, StateWatching, look.State)
		clk.Step(time.Second)
		look, _ = w.Observe(restartingPod(1, false, t0))
		require.Equal(t, StateHarmed, look.State, "not Ready by the end of its window")
		assert.Equal(t, resize.HarmNotReady, look.Harm.Kind)
		assert.Contains(t, look.Harm.Message, "not Ready again after the restart its resize caused")
		assert.Equal(t, "app: requests memory=1Gi", look.Resize.To.String())
	})
	t.Run("restarted once more", func(t *testing.T) {
		w, clk := newWatcher()
		sent(w)
		w.Observe(restartingPod(1, false, t0))
		clk.Step(time.Minute)
		look, _ := w.Observe(restartingPod(2, false, t0))
		assert.Equal(t, StateHarmed, look.State)
		assert.Equal(t, resize.HarmRestarted, look.Harm.Kind)
	})
}

// Watches merge: each lowering keeps its own window, and harm goes to
// every lowering open when it happened.
func TestLoweringsKeepTheirOwnWindows(t *testing.T) {
	mem := func(from, to string) Resize {
		r := lowered()
		r.From = resources.Resources{"app": {Requests: testpod.List("1", from)}}
		r.To = resources.Resources{"app": {Requests: testpod.List("1", to)}}
		return r
	}
	cpu := func(from, to, memory string) Resize {
		r := lowered()
		r.From = resources.Resources{"app": {Requests: testpod.List(from, memory)}}
		r.To = resources.Resources{"app": {Requests: testpod.List(to, memory)}}
		return r
	}
	pod := func(cpu, memory string, restarts int32, at time.Time) *corev1.Pod {
		p := testpod.New("p").Container("app", cpu, memory).Running().Obj()
		if restarts > 0 {
			s := &p.Status.ContainerStatuses[0]
			s.RestartCount = restarts
			s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(at)}
		}
		return p
	}
	t.Run("two lowerings, each its window; harm goes to both", func(t *testing.T) {
		w, clk := newWatcher()
		first := mem("2Gi", "1Gi")
		first.Canary = true
		w.Sent("uid-p", first)
		w.Observe(pod("1", "1Gi", 0, t0))
		clk.Step(2 * time.Minute)
		w.Sent("uid-p", cpu("1", "500m", "1Gi"))
		look, _ := w.Observe(pod("500m", "1Gi", 0, t0))
		require.True(t, look.Started)
		assert.False(t, look.Resize.Canary)
		assert.Equal(t, window-2*time.Minute, look.After, "the first lowering's window ends first")
		clk.Step(time.Minute)
		look, _ = w.Observe(pod("500m", "1Gi", 1, clk.Now()))
		require.Equal(t, StateHarmed, look.State)
		assert.Equal(t, "app: requests cpu=1 memory=2Gi", look.Resize.From.String(), "both lowerings, back to what they were")
		assert.Equal(t, "app: requests cpu=500m memory=1Gi", look.Resize.To.String())
		assert.True(t, look.Resize.Canary, "the canary's among them")
		assert.True(t, look.Over)
	})
	t.Run("harm after the first window ended goes to the second only", func(t *testing.T) {
		w, clk := newWatcher()
		first := mem("2Gi", "1Gi")
		first.Canary = true
		w.Sent("uid-p", first)
		w.Observe(pod("1", "1Gi", 0, t0))
		clk.Step(5 * time.Minute)
		w.Sent("uid-p", cpu("1", "500m", "1Gi"))
		w.Observe(pod("500m", "1Gi", 0, t0))
		clk.Step(5 * time.Minute)
		look, _ := w.Observe(pod("500m", "1Gi", 0, t0))
		require.Len(t, look.Passed, 1)
		assert.True(t, look.Passed[0].Canary, "the canary passed at its own window's end")
		assert.Equal(t, "app: requests memory=1Gi", look.Passed[0].To.String())
		clk.Step(time.Minute)
		look, _ = w.Observe(pod("500m", "1Gi", 1, clk.Now()))
		require.Equal(t, StateHarmed, look.State)
		assert.Equal(t, "app: requests cpu=500m", look.Resize.To.String())
		assert.False(t, look.Resize.Canary)
	})
	t.Run("a look late: harm is attributed to what was open when it happened", func(t *testing.T) {
		w, clk := newWatcher()
		w.Sent("uid-p", mem("2Gi", "1Gi"))
		w.Observe(pod("1", "1Gi", 0, t0))
		clk.Step(window + time.Hour)
		look, _ := w.Observe(pod("1", "1Gi", 1, t0.Add(window/2)))
		assert.Equal(t, StateHarmed, look.State, "OOM-killed within its window, seen late")
		w.Sent("uid-p", mem("2Gi", "1Gi"))
		w.Observe(pod("1", "1Gi", 1, t0))
		clk.Step(window + time.Hour)
		look, _ = w.Observe(pod("1", "1Gi", 2, clk.Now().Add(-time.Minute)))
		assert.Equal(t, StatePassed, look.State, "OOM-killed after its window")
	})
	t.Run("lowered further: the new lowering takes the value, from where it was first", func(t *testing.T) {
		w, clk := newWatcher()
		w.Sent("uid-p", mem("2Gi", "1Gi"))
		w.Observe(pod("1", "1Gi", 0, t0))
		clk.Step(time.Minute)
		w.Sent("uid-p", mem("1Gi", "512Mi"))
		w.Observe(pod("1", "512Mi", 0, t0))
		s, _ := w.Saved("uid-p")
		require.Len(t, s.Lowered, 1)
		assert.Equal(t, "app: requests memory=2Gi", s.Lowered[0].From.String())
		assert.Equal(t, "app: requests memory=512Mi", s.Lowered[0].To.String())
		assert.Equal(t, t0.Add(time.Minute), s.Lowered[0].Since)
	})
	t.Run("raised back: the lowering ends without a verdict", func(t *testing.T) {
		w, clk := newWatcher()
		first := mem("2Gi", "1Gi")
		first.Canary = true
		w.Sent("uid-p", first)
		w.Observe(pod("1", "1Gi", 0, t0))
		clk.Step(time.Minute)
		w.Sent("uid-p", mem("1Gi", "3Gi"))
		look, _ := w.Observe(pod("1", "3Gi", 0, t0))
		require.Len(t, look.Dropped, 1)
		assert.True(t, look.Dropped[0].Canary)
		_, ok := w.Saved("uid-p")
		assert.False(t, ok, "nothing lowered is watched")
		assert.True(t, w.Watching("uid-p"), "the raise is, for its window")
	})
	t.Run("bounded", func(t *testing.T) {
		w, clk := newWatcher()
		for i := range 2 * maxLowerings {
			r := lowered()
			r.From = resources.Resources{fmt.Sprintf("c%d", i): {Requests: testpod.List("1", "")}}
			r.To = resources.Resources{fmt.Sprintf("c%d", i): {Requests: testpod.List("500m", "")}}
			w.Sent("uid-p", r)
			p := testpod.New("p").Container("app", "1", "1Gi").Running().Obj()
			w.Observe(p)
			clk.Step(time.Second)
		}
		s, _ := w.Saved("uid-p")
		assert.Len(t, s.Lowered, maxLowerings)
		values := 0
		for _, l := range s.Lowered {
			values += len(l.To)
		}
		assert.Equal(t, 2*maxLowerings, values, "merged, none forgotten")
	})
}

// A pod is one canary to its gate, of its newest decrease: an older
// lowering open is no canary's any more. And a restarting resize under
// way excuses nothing before its restart shows.
func TestOneCanaryLoweringAndNoExcuseBeforeTheRestart(t *testing.T) {
	t.Run("one canary lowering", func(t *testing.T) {
		w, clk := newWatcher()
		first := lowered()
		first.Canary = true
		w.Sent("uid-p", first)
		w.Observe(podAt(true))
		clk.Step(time.Minute)
		second := lowered()
		second.From = resources.Resources{"app": {Requests: testpod.List("1", "1Gi")}}
		second.To = resources.Resources{"app": {Requests: testpod.List("500m", "1Gi")}}
		second.Canary = true
		w.Sent("uid-p", second)
		look, _ := w.Observe(testpod.New("p").Container("app", "500m", "1Gi").Running().Obj())
		require.True(t, look.Started)
		assert.True(t, look.Resize.Canary)
		s, _ := w.Saved("uid-p")
		require.Len(t, s.Lowered, 2)
		assert.False(t, s.Lowered[0].Canary)
		assert.True(t, s.Lowered[1].Canary)
	})
	t.Run("no excuse before the restart", func(t *testing.T) {
		w, clk := newWatcher()
		w.Sent("uid-p", lowered())
		w.Observe(restartingPod(0, true, t0.Add(-time.Hour)))
		clk.Step(time.Minute)
		r := lowered()
		r.From, r.To = lowered().To, resources.Resources{"app": {Requests: testpod.List("1", "512Mi")}}
		r.Before = resize.BaselineOf(restartingPod(0, true, t0.Add(-time.Hour)))
		r.Restarts = []string{"app"}
		w.Sent("uid-p", r)
		deferred := restartingPod(0, false, clk.Now())
		deferred.Generation = 3
		look, _ := w.Observe(deferred)
		assert.Equal(t, grace, look.After)
		clk.Step(grace)
		look, _ = w.Observe(deferred)
		require.Equal(t, StateHarmed, look.State, "not Ready while the resize waits: the first lowering's harm")
		assert.Equal(t, "app: requests memory=1Gi", look.Resize.To.String())
	})
}
