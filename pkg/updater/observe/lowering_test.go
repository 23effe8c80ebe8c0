package observe

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

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
