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
