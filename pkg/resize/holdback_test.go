package resize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// The rows of the resize windows (docs/resize-timing.md): outside its
// window a resize that lowers a value or restarts a container waits, an
// increase that restarts nothing goes (unless the scope is all).
func TestWindowHoldsDecreasesAndRestarts(t *testing.T) {
	now := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	opens := now.Add(11 * time.Hour)
	closed := WindowHold{Held: true, Until: opens, Why: "Mon-Fri 01:00-05:00 UTC on the VPA"}
	desired := func(cpu, mem string) recommendation.Desired {
		return recommendation.Desired{"c": {Requests: testpod.List(cpu, mem)}}
	}
	plain := func() *testpod.Builder { return testpod.New("p").Container("c", "100m", "100Mi").Running() }
	restartsOnMemory := func() *testpod.Builder {
		return plain().ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer)
	}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		desired    recommendation.Desired
		windows    Windows
		disruption bool
		action     Action
		reason     Reason
		recheck    time.Duration
		target     string
		inMessage  string
	}{
		{"a decrease outside the window waits until it opens", plain().Obj(), desired("50m", "50Mi"),
			Windows{Decreases: closed}, true, ActionWait, ReasonOutsideWindow, 11 * time.Hour, "", "opens at 2026-11-27T01:00:00Z"},
		{"an increase outside the window is sent", plain().Obj(), desired("200m", "200Mi"),
			Windows{Decreases: closed}, true, ActionPatch, ReasonResize, 0, "c: requests cpu=200m memory=200Mi", ""},
		{"scope all: an increase waits too", plain().Obj(), desired("200m", "200Mi"),
			Windows{Decreases: closed, All: closed}, true, ActionWait, ReasonOutsideWindow, 11 * time.Hour, "", "the resize waits"},
		{"cpu up and memory down outside the window: the increase goes, the decrease waits", plain().Obj(), desired("200m", "50Mi"),
			Windows{Decreases: closed}, true, ActionPatch, ReasonDecreasesHeld, 0, "c: requests cpu=200m memory=100Mi", "decreases wait for the resize window"},
		{"an increase that restarts a container waits", restartsOnMemory().Obj(), desired("100m", "200Mi"),
			Windows{Decreases: closed}, true, ActionWait, ReasonOutsideWindow, 11 * time.Hour, "", "restarts containers"},
		{"a restarting resize outside its window waits for the window, not for the budget", restartsOnMemory().Obj(), desired("100m", "200Mi"),
			Windows{Decreases: closed}, false, ActionWait, ReasonOutsideWindow, 11 * time.Hour, "", ""},
		{"the increase of a resize that also restarts goes without the restart", restartsOnMemory().Obj(), desired("200m", "50Mi"),
			Windows{Decreases: closed}, true, ActionPatch, ReasonDecreasesHeld, 0, "c: requests cpu=200m memory=100Mi", ""},
		{"no window within a week: decided again in a day", plain().Obj(), desired("50m", "50Mi"),
			Windows{Decreases: WindowHold{Held: true, Why: "x"}}, true, ActionWait, ReasonOutsideWindow, 24 * time.Hour, "", "no window opens within a week"},
		{"inside the window: sent", plain().Obj(), desired("50m", "50Mi"),
			Windows{}, true, ActionPatch, ReasonResize, 0, "c: requests cpu=50m memory=50Mi", ""},
		{"a restarting resize inside the window still asks the budget", restartsOnMemory().Obj(), desired("100m", "200Mi"),
			Windows{}, false, ActionWait, ReasonDisruptionBudget, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(Input{Pod: tt.pod, Desired: tt.desired, Threshold: 0.1, ServerMinor: 35,
				DisruptionAllowed: tt.disruption, Now: now, Windows: tt.windows})
			assert.Equal(t, tt.action, d.Action, d.Message)
			assert.Equal(t, tt.reason, d.Reason, d.Message)
			assert.Equal(t, tt.recheck, d.RecheckAfter)
			if tt.target != "" {
				assert.Equal(t, tt.target, d.Target.String())
			}
			if tt.inMessage != "" {
				assert.Contains(t, d.Message, tt.inMessage)
			}
			if d.Action == ActionPatch {
				assert.False(t, IsDisruptive(tt.pod, d.Target) && (tt.windows.Decreases.Held || tt.windows.All.Held),
					"a resize sent outside its window restarts nothing")
			}
		})
	}
}

// The evidence rule goes first: what it holds is not looked at again by
// the window.
func TestEvidenceThenWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	in := evidenceInput(t0, t0.Add(6*time.Minute), rec{"200m/50Mi", "20m/20Mi", "50/50Gi"}, checkpoint(t0, 5*time.Minute, 30), time.Hour)
	in.Windows = Windows{Decreases: WindowHold{Held: true, Until: t0.Add(time.Hour), Why: "w"}}
	d := Decide(in)
	assert.Equal(t, ActionPatch, d.Action, d.Message)
	assert.Equal(t, ReasonDecreasesHeld, d.Reason)
	assert.Equal(t, "c: requests cpu=200m memory=100Mi", d.Target.String())
	assert.Contains(t, d.Message, "decreases wait for evidence")
	assert.NotContains(t, d.Message, "resize window", "nothing is left for the window to hold")
}
